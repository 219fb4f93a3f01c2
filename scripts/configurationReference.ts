import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { SETTINGS } from '../runtime/Configuration.ts';
import { resolveRuntimeTiming } from '../runtime/RuntimeTiming.ts';
import { type TypeMember, typeMembers } from './typeMembers.ts';

/** Where the runtime's timers are declared, in the order the table lists them. */
const TIMER_SOURCES = [
  ['transport/Transport.ts', 'TransportTiming'],
  ['control-plane/ControlPlaneTiming.ts', 'ControlPlaneTiming'],
  ['runtime/RuntimeTiming.ts', 'RuntimeTiming'],
] as const;

/** A table cell: one line, pipes escaped. */
function cell(text: string): string {
  return text.replace(/\|/g, '\\|').replace(/\s+/g, ' ').trim();
}

function documented(member: TypeMember, where: string): string {
  if (member.doc === '') {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `${where}.${member.name} has no TSDoc comment; document it, the configuration reference is built from it`,
    );
  }
  return member.doc;
}

/** 30000 → `30000 (30 s)`; 250 and a count stay as they are. */
function defaultOf(name: string, value: number): string {
  if (!name.endsWith('Ms')) return `${value}`;
  const units: [number, string][] = [
    [3_600_000, 'h'],
    [60_000, 'min'],
    [1_000, 's'],
  ];
  const unit = units.find(([size]) => value >= size && value % (size / 10) === 0);
  return unit === undefined
    ? `${value}`
    : `${value} (${(value / unit[0]).toLocaleString('en')} ${unit[1]})`;
}

function environmentTable(): string {
  const rows = SETTINGS.map(
    (s) =>
      `| \`${s.variable}\` | ${cell(s.allowed)} | ${s.flag === undefined ? '' : `\`${s.flag}\``} | ${s.secret ? 'yes' : ''} |`,
  );
  return ['| variable | takes | flag | secret |', '| --- | --- | --- | --- |', ...rows].join('\n');
}

function optionsTable(): string {
  const rows = typeMembers('runtime/RuntimeOptions.ts', 'RuntimeOptions').map(
    (m) => `| \`${m.name}\` | \`${cell(m.type)}\` | ${cell(documented(m, 'RuntimeOptions'))} |`,
  );
  return ['| option | type | what it sets |', '| --- | --- | --- |', ...rows].join('\n');
}

function timersTable(): string {
  const defaults = resolveRuntimeTiming({}) as unknown as Record<string, number>;
  const members = TIMER_SOURCES.flatMap(([file, name]) =>
    typeMembers(file, name).map((m) => ({ member: m, where: name })),
  );
  const listed = new Set(members.map((m) => m.member.name));
  const missing = Object.keys(defaults).filter((k) => !listed.has(k));
  if (missing.length > 0) {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      `timers ${missing.join(', ')} are declared outside ${TIMER_SOURCES.map(([, n]) => n).join(', ')}; add where they are to TIMER_SOURCES`,
    );
  }
  const rows = members.map(({ member, where }) => {
    const value = defaults[member.name];
    return `| \`${member.name}\` | ${value === undefined ? '' : defaultOf(member.name, value)} | ${cell(documented(member, where))} |`;
  });
  return [
    '| timer | default (ms, or a count) | what it times |',
    '| --- | --- | --- |',
    ...rows,
  ].join('\n');
}

/**
 * The generated parts of `docs/configuration.md`, by name: every environment variable an
 * opstate process reads (`SETTINGS` in `runtime/Configuration.ts`, with what each takes, its flag
 * and whether it is secret), every `createRuntime` option (`RuntimeOptions`, with its TSDoc) and
 * every timer of `OPSTATE_TIMING` (its TSDoc and the default `resolveRuntimeTiming` gives).
 *
 * @example
 * ```ts
 * const { environment, options, timers } = configurationReference();
 * ```
 */
export function configurationReference(): {
  environment: string;
  options: string;
  timers: string;
} {
  return { environment: environmentTable(), options: optionsTable(), timers: timersTable() };
}
