import type { AttentionSection } from '../persistence/loadAttention.ts';
import { attentionSection } from './attentionView.ts';
import { html, type SafeHtml } from './html.ts';

/**
 * One page of one attention category.
 *
 * @example
 * ```ts
 * const content = attentionCategoryPage(await data.attention('stuck', undefined));
 * ```
 */
export function attentionCategoryPage(section: AttentionSection): SafeHtml {
  return html`<h1>Attention</h1><section class="card attention">${attentionSection(section)}</section>`;
}
