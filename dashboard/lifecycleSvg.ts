import type { AnyStateMachine } from 'xstate';
import { escapeHtml, raw, type SafeHtml } from './html.ts';

/** One edge of the drawing: every event that leads from one state to another. */
interface Edge {
  readonly from: string;
  readonly to: string;
  readonly events: string[];
}

/** States and edges of a machine's top level, read from its definition. */
export function lifecycleGraph(machine: AnyStateMachine): {
  initial: string | undefined;
  states: { key: string; final: boolean }[];
  edges: Edge[];
} {
  const root = machine.root;
  const edges = new Map<string, Edge>();
  const states = Object.entries(root.states).map(([key, node]) => {
    for (const [eventType, definitions] of node.transitions) {
      for (const t of definitions) {
        for (const target of t.target ?? [node]) {
          const id = `${key}->${target.key}`;
          const edge = edges.get(id) ?? { from: key, to: target.key, events: [] };
          if (!edge.events.includes(eventType)) edge.events.push(eventType);
          edges.set(id, edge);
        }
      }
    }
    return { key, final: node.type === 'final' };
  });
  return { initial: root.initial?.target?.[0]?.key, states, edges: [...edges.values()] };
}

/**
 * Layers states left to right by the longest path from the initial state, not counting edges
 * that lead back (a retry, a reset): those are drawn as arcs underneath.
 */
function layers(graph: ReturnType<typeof lifecycleGraph>): Map<string, number> {
  const out = new Map<string, string[]>();
  for (const e of graph.edges)
    if (e.from !== e.to) out.set(e.from, [...(out.get(e.from) ?? []), e.to]);
  const back = new Set<string>();
  const onStack = new Set<string>();
  const done = new Set<string>();
  const order: string[] = [];
  const visit = (s: string) => {
    onStack.add(s);
    for (const t of out.get(s) ?? []) {
      if (onStack.has(t)) back.add(`${s}->${t}`);
      else if (!done.has(t)) visit(t);
    }
    onStack.delete(s);
    done.add(s);
    order.unshift(s);
  };
  if (graph.initial !== undefined) visit(graph.initial);
  for (const s of graph.states) if (!done.has(s.key)) visit(s.key);
  const layer = new Map(graph.states.map((s) => [s.key, 0]));
  for (const s of order) {
    for (const t of out.get(s) ?? []) {
      if (back.has(`${s}->${t}`)) continue;
      layer.set(t, Math.max(layer.get(t) ?? 0, (layer.get(s) ?? 0) + 1));
    }
  }
  return layer;
}

const W = 150;
const H = 54;
const GAP_X = 70;
const GAP_Y = 36;
const PAD = 24;

/** Each state's box: its name, its count, and a link to its operations. */
function stateParts(
  graph: ReturnType<typeof lifecycleGraph>,
  pos: ReadonlyMap<string, { x: number; y: number }>,
  counts: Readonly<Record<string, number>>,
  linkOf: (state: string) => string,
): string[] {
  return graph.states.flatMap((s) => {
    const p = pos.get(s.key) as { x: number; y: number };
    const n = counts[s.key] ?? 0;
    return [
      `<a href="${escapeHtml(linkOf(s.key))}" class="state" data-state="${escapeHtml(s.key)}">`,
      `<rect x="${p.x}" y="${p.y}" width="${W}" height="${H}" rx="10" class="state-box${s.final ? ' final' : ''}${s.key === graph.initial ? ' initial' : ''}"/>`,
      s.final
        ? `<rect x="${p.x + 4}" y="${p.y + 4}" width="${W - 8}" height="${H - 8}" rx="7" class="state-inner"/>`
        : '',
      `<text x="${p.x + W / 2}" y="${p.y + 22}" text-anchor="middle" class="state-name">${escapeHtml(s.key)}</text>`,
      `<text x="${p.x + W / 2}" y="${p.y + 42}" text-anchor="middle" class="state-count" data-count="${n}">${n.toLocaleString('en-US')}</text>`,
      '</a>',
    ];
  });
}

/**
 * Draws a machine's lifecycle as SVG from its definition (states laid out by the longest path
 * from the initial state, every transition an arrow labelled with its events), with a count on
 * each state and a link from each state to its operations.
 *
 * @example
 * ```ts
 * lifecycleSvg(operationMachine, { PENDING: 3, COMPLETED: 120 }, (s) => `/operations?status=${s}`);
 * ```
 */
export function lifecycleSvg(
  machine: AnyStateMachine,
  counts: Readonly<Record<string, number>>,
  linkOf: (state: string) => string,
): SafeHtml {
  const graph = lifecycleGraph(machine);
  const layer = layers(graph);
  const rows = new Map<number, number>();
  const pos = new Map<string, { x: number; y: number }>();
  for (const s of graph.states) {
    const l = layer.get(s.key) ?? 0;
    const r = rows.get(l) ?? 0;
    rows.set(l, r + 1);
    pos.set(s.key, { x: PAD + l * (W + GAP_X), y: PAD + r * (H + GAP_Y) });
  }
  const columns = Math.max(...layer.values()) + 1;
  const maxRows = Math.max(...rows.values());
  const backEdges = graph.edges.filter(
    (e) => (layer.get(e.to) ?? 0) <= (layer.get(e.from) ?? 0) && e.from !== e.to,
  );
  const bottom = PAD + maxRows * (H + GAP_Y) - GAP_Y;
  const width = PAD * 2 + columns * W + (columns - 1) * GAP_X;
  const height = bottom + PAD + backEdges.length * 26 + 10;
  const parts: string[] = [];
  backEdges.forEach((e, n) => {
    const a = pos.get(e.from) as { x: number; y: number };
    const b = pos.get(e.to) as { x: number; y: number };
    const depth = bottom + 18 + n * 26;
    const x1 = a.x + W / 2;
    const x2 = b.x + W / 2 + 12;
    parts.push(
      `<path class="edge back" d="M${x1},${a.y + H} C${x1},${depth} ${x2},${depth} ${x2},${b.y + H}" marker-end="url(#arrow)"/>`,
      `<text class="edge-label" x="${(x1 + x2) / 2}" y="${depth - 4}" text-anchor="middle">${escapeHtml(e.events.join(' / '))}</text>`,
    );
  });
  // Edges to the next column leave a state's right side and enter the next one's left side at
  // ports spread along them, so arrows and labels do not pile up; an edge that skips columns
  // runs in a lane of its own under its source's row, labelled where it starts.
  const forward = graph.edges.filter((e) => !backEdges.includes(e) && e.from !== e.to);
  const span = (e: Edge) => (layer.get(e.to) ?? 0) - (layer.get(e.from) ?? 0);
  const port = (list: Edge[], key: (e: Edge) => string, other: (e: Edge) => string) => {
    const at = new Map<Edge, number>();
    const groups = new Map<string, Edge[]>();
    for (const e of list) groups.set(key(e), [...(groups.get(key(e)) ?? []), e]);
    for (const group of groups.values()) {
      group.sort((x, y) => (pos.get(other(x))?.y ?? 0) - (pos.get(other(y))?.y ?? 0));
      for (const [n, e] of group.entries()) at.set(e, ((n + 1) * H) / (group.length + 1));
    }
    return at;
  };
  const outPort = port(
    forward.filter((e) => span(e) === 1),
    (e) => e.from,
    (e) => e.to,
  );
  const inPort = port(
    forward,
    (e) => e.to,
    (e) => e.from,
  );
  let lane = 0;
  for (const e of forward) {
    const a = pos.get(e.from) as { x: number; y: number };
    const b = pos.get(e.to) as { x: number; y: number };
    const label = escapeHtml(e.events.join(' / '));
    const [x2, y2] = [b.x, b.y + (inPort.get(e) ?? H / 2)];
    if (span(e) === 1) {
      const [x1, y1] = [a.x + W, a.y + (outPort.get(e) ?? H / 2)];
      // A steep arrow is labelled beside its lower half, clear of the lanes above it.
      const steep = Math.abs(y2 - y1) > H / 2;
      const [lx, ly] = steep
        ? [x1 + (x2 - x1) * 0.75 - 6, y1 + (y2 - y1) * 0.75 + 4]
        : [(x1 + x2) / 2, (y1 + y2) / 2 - 5];
      parts.push(
        `<line class="edge" x1="${x1}" y1="${y1}" x2="${x2 - 2}" y2="${y2}" marker-end="url(#arrow)"/>`,
        `<text class="edge-label" x="${lx}" y="${ly}" text-anchor="${steep ? 'end' : 'middle'}">${label}</text>`,
      );
      continue;
    }
    lane++;
    const ly = a.y + H + (lane * GAP_Y) / 3;
    const x1 = a.x + W - 18;
    parts.push(
      `<path class="edge" d="M${x1},${a.y + H} L${x1},${ly - 6} Q${x1},${ly} ${x1 + 6},${ly} L${x2 - 30},${ly} C${x2 - 12},${ly} ${x2 - 16},${y2} ${x2 - 2},${y2}" marker-end="url(#arrow)"/>`,
      `<text class="edge-label" x="${x1 + 8}" y="${ly - 3}" text-anchor="start">${label}</text>`,
    );
  }
  parts.push(...stateParts(graph, pos, counts, linkOf));
  return raw(
    `<svg class="lifecycle" role="img" aria-label="the operation lifecycle with counts per state" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}">` +
      '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z"/></marker></defs>' +
      parts.join('') +
      '</svg>',
  );
}
