/*
 * prompts.h — the requests of clpa-demo --prompts FILE, one a line.
 *
 * The file's first non-blank line decides the format of the whole file
 * (not each line, so that a plain prompt may start with "{"):
 *
 *   its first non-blank
 *   character is "{"     JSON lines: every non-blank line is one object
 *                          {"prompt": "text", "max_tokens": 64}
 *                        "prompt" (a string) is required, "max_tokens" (an
 *                        integer in [1, 2^20]) optional; any other key, a
 *                        key given twice, a value of another type or
 *                        anything after the object is an error.
 *   otherwise            plain text: every non-blank line is a prompt, its
 *                        bytes as they stand (spaces kept, no escapes).
 *
 * Lines end at "\n"; a "\r" before it (CRLF files) is dropped, and so is a
 * UTF-8 byte order mark at the start of the file. Blank lines (nothing but
 * spaces, tabs and the line end) are skipped in both formats, so request i
 * is the i-th non-blank line; each prompt keeps its line number.
 *
 * JSON strings are decoded in full: the escapes \" \\ \/ \b \f \n \r \t
 * and \uXXXX, a surrogate pair (\uD83D\uDE00) to the one character it
 * stands for, all written as UTF-8; a lone surrogate, another escape or an
 * unescaped control byte (below 0x20) is an error. Other bytes are copied
 * as they are (the tokenizer takes any bytes). This is a parser for this
 * one shape, not a general JSON reader: values are strings and integers.
 *
 * Errors name the place as compilers do, "FILE:LINE:COLUMN: what" (the
 * column counts bytes from 1), or "FILE: what" for the file as a whole.
 * Host C11, libc only.
 */
#ifndef CLPA_DEMO_PROMPTS_H
#define CLPA_DEMO_PROMPTS_H

#include <stddef.h>
#include <stdint.h>

#include "clpa_base.h"
#include "error.h"

#define DEMO_MAX_TOKENS_LIMIT (1 << 20) /* the largest "max_tokens" (--output-max's) */

typedef struct demo_prompt {
  char *text;         /* the prompt's bytes, NUL-terminated (but may hold NUL: \u0000) */
  size_t len;
  int32_t max_tokens; /* -1: not given */
  int32_t line;       /* in the file, from 1 */
} demo_prompt;

typedef struct demo_prompts {
  demo_prompt *items;
  int32_t count;
  int json; /* the file's format: 1 JSON lines, 0 plain text */
} demo_prompts;

/* Parses size bytes of a file's contents; name is the file's name in
 * messages. On CLPA_OK *out holds the prompts (zero when the file has no
 * non-blank line); free them with demo_prompts_free. On
 * CLPA_ERR_INVALID_ARG (a malformed line) or CLPA_ERR_OUT_OF_MEMORY,
 * demo_last_error() (error.h) has the message and *out holds nothing. */
clpa_status demo_prompts_parse(const char *data, size_t size, const char *name, demo_prompts *out);
/* Reads the file at path and parses it; CLPA_ERR_IO when it cannot be
 * read (demo_last_error() says why). */
clpa_status demo_prompts_read(const char *path, demo_prompts *out);
/* Frees what parse or read made; accepts an emptied or zeroed *p. */
void demo_prompts_free(demo_prompts *p);

#endif
