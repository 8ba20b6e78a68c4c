/* jsonc.h — JSON with comments, as VS Code writes .vscode/mcp.json, turned
 * into JSON for cJSON: comments (from "//" to the end of the line, and from
 * "/" "*" to the next "*" "/", which do not nest) and trailing commas (a
 * comma before the ] or } that closes its array or object) become spaces,
 * and so does a UTF-8 byte order mark.  In place: the text keeps its
 * length and every newline where it was, so the line and column of a parse
 * error still point into the file as written.  Comment marks inside a
 * string are text.  A pure function, any thread. */
#ifndef HUTCH_JSONC_H
#define HUTCH_JSONC_H

#include <stddef.h>

/* 0; or -EINVAL when a block comment is not closed, *line and *col (from
 * 1) saying where it starts.  Nothing else is checked: what is still not
 * JSON is the parser's to report. */
int hutch_jsonc_strip(char *text, size_t len, unsigned *line, unsigned *col);

#endif
