/*
 * explain: the causes of a cell as document lines (rank, id, score, why,
 * where to look), with the dump warnings and the origin of the error
 * before them: what the causes pane shows for the first divergence and the
 * detail screen for its cell.  Until diagnosis rules are loaded it says
 * so; it never invents causes.
 */
#ifndef TB_UI_EXPLAIN_H
#define TB_UI_EXPLAIN_H

#include "diagnose/cause.h"
#include "tui/doc.h"
#include "tui/view.h"

/* cell: a cell index, or -1 for the first divergence.  own: the causes
 * measured for that cell when it is not the first divergence (the
 * diagnosis holds those of the first), or NULL. */
void explain_causes(const view *v, doc *dc, long cell, const tb_causes *own);

#endif
