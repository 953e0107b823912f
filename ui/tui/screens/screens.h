/*
 * screens: the screens of the interactive view, for the loop's table (one
 * per row of TB_SCREEN_LIST, tui/screen.h).
 */
#ifndef TB_UI_SCREENS_H
#define TB_UI_SCREENS_H

#include "tui/screen.h"

#define TB_SCREEN_EXTERN(id, name, action) extern const screen_ops name##_screen;
TB_SCREEN_LIST(TB_SCREEN_EXTERN)
#undef TB_SCREEN_EXTERN

#endif
