#!/bin/sh
# keymap.sh: the KEYMAP part of tbisect(1), in mdoc, from the key and
# command tables of the interactive view.  tests/e2e/man.sh checks that
# man/tbisect.1 holds exactly this text between its BEGIN KEYMAP and END
# KEYMAP lines.  To update the page after changing ui/tui/keymap.h or
# ui/tui/cmdline.c, run from the build directory:
#
#   ./tbisect --keys | sh ../man/keymap.sh
#
# and paste the output between the markers.
awk -F '\t' '
# A text line of the page: escape a leading control character.
function text(s) { if (s ~ /^[.\047]/) s = "\\&" s; return s }
BEGIN {
	print ".Ss Keys"
	print "The keys of every screen, from the key table the help screen"
	print ".Pq Ic \\&?"
	print "shows too; each runs one named action:"
	print ".Bl -tag -width Ds"
}
$1 == "key" { printf ".It Li \"\\&%s\" Pq Cm %s\n%s\n", $2, $3, text($4) }
$1 == "command" && !cmds {
	print ".El"
	print ".Ss Commands"
	print "After"
	print ".Ic \\&: ,"
	print "a command line with Tab completing commands, cell names and tensor names."
	print "The action of each key above can be typed by its name too"
	print ".Pq Ql :causes , Ql :first-divergence ;"
	print "all but the prompt, the search and the mouse click."
	print "The commands:"
	print ".Bl -tag -width Ds"
	cmds = 1
}
$1 == "command" { printf ".It Li \"\\&:%s\"\n%s\n", $2, text($3) }
END { print ".El" }
'
