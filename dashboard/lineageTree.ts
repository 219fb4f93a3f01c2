import type { LineageLink } from '../persistence/reads/selectLineage.ts';

/** One copy in a lineage tree, with the links reached through the operation beyond it. */
export interface LineageNode {
  readonly link: LineageLink;
  readonly children: readonly LineageNode[];
}

/**
 * Builds the lineage tree from the links' parent links: a link at depth d + 1 hangs under each
 * link at depth d whose operation (the one that produced or consumed that copy) is the link's
 * `via`. Depth 1 links are the roots (they are reached through the inspected operation itself).
 * A link whose parent is absent (cut by the walk's depth limit) is dropped with its subtree.
 *
 * @example
 * ```ts
 * const roots = lineageTree(await selectLineage(database, id, 'up'));
 * roots[0]?.children.map((c) => c.link.copy.artifactName); // that package's files
 * ```
 */
export function lineageTree(links: readonly LineageLink[]): LineageNode[] {
  const byParent = new Map<string, LineageLink[]>();
  for (const l of links) {
    const key = `${l.depth}|${l.via}`;
    const list = byParent.get(key);
    if (list === undefined) byParent.set(key, [l]);
    else list.push(l);
  }
  const build = (link: LineageLink): LineageNode => ({
    link,
    children:
      link.operation === null
        ? []
        : (byParent.get(`${link.depth + 1}|${link.operation.id}`) ?? []).map(build),
  });
  return links.filter((l) => l.depth === 1).map(build);
}
