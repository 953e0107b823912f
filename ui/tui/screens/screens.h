/*
 * screens: the screens of the interactive view, for the loop's table (one
 * per screen_id of tui/screen.h).
 */
#ifndef TB_UI_SCREENS_H
#define TB_UI_SCREENS_H

#include "tui/screen.h"

extern const screen_ops heatmap_screen, detail_screen, causes_screen, help_screen, history_screen, unpaired_screen,
	suggest_screen;

#endif
