import { ATTENTION_TITLES, type AttentionItem } from '../machines/attention.ts';
import { shortId } from '../machines/shortId.ts';
import type { AttentionList, AttentionSection } from '../persistence/loadAttention.ts';
import { html, type SafeHtml } from './html.ts';

function subject(item: AttentionItem): SafeHtml {
  if (item.subject.type === 'operation') {
    return html`<a class="id" href="/operations/${item.subject.id}">${shortId(item.subject.id)}</a>`;
  }
  if (item.subject.type === 'package') {
    return html`<a class="id" href="/packages/${item.subject.id}">${shortId(item.subject.id)}</a>`;
  }
  if (item.subject.type === 'queue') {
    return html`<a class="id" href="/workers#queue-${item.subject.id}">${item.subject.id}</a>`;
  }
  return html`<span class="id" title="${item.subject.id}">${shortId(item.subject.id.split('|').at(-1) ?? '')}</span>`;
}

/** One category: its title, total, a page of items and the link to the next page. */
export function attentionSection(section: AttentionSection): SafeHtml {
  const rows = section.items.map(
    (i) => html`<tr data-subject="${i.subject.id}" data-category="${i.category}">
      <td>${subject(i)}</td><td>${i.kind ?? i.subject.type}</td>
      <td><span class="badge ${i.state}">${i.state}</span></td>
      <td class="n"><span data-since="${i.since}"></span></td><td class="why">${i.why}</td></tr>`,
  );
  const next =
    section.next === null
      ? ''
      : html`<p><a href="/attention?category=${section.category}&after=${encodeURIComponent(section.next)}">next ${section.items.length} →</a></p>`;
  return html`<div class="attention-section" data-category="${section.category}" data-total="${section.total}">
    <h3>${ATTENTION_TITLES[section.category]} <span class="count">(${section.total.toLocaleString('en-US')}${section.totalCapped ? '+' : ''})</span></h3>
    ${
      section.items.length === 0
        ? html`<p class="empty">none</p>`
        : html`<table><thead><tr><th>subject</th><th>kind</th><th>state</th><th class="n">for</th><th>why, and what to do</th></tr></thead><tbody>${rows}</tbody></table>`
    }${next}</div>`;
}

/** The whole attention list, every category. */
export function attentionView(list: AttentionList): SafeHtml {
  const total = list.sections.reduce((n, s) => n + s.total, 0);
  const capped = list.sections.some((s) => s.totalCapped);
  return html`<section class="card attention" data-total="${total}">
    <h2>Attention <span class="count">(${total.toLocaleString('en-US')}${capped ? '+' : ''})</span></h2>
    ${list.heartbeatsVisible ? '' : html`<p class="muted">Heartbeats are not visible from this process (in-process transport): a SCHEDULED or IN_PROGRESS operation is listed only past the reconciler floor.</p>`}
    ${list.sections.map(attentionSection)}</section>`;
}
