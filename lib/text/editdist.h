/* text/editdist.h - how far apart two names are, for "did you mean" hints.
 *
 * Libc only, like everything in lib/text/: the registry (lib/config/param.c,
 * for a misspelt SMDDP_ variable) and the config file (lib/config/config.c,
 * for a misspelt key) both ask, so it lives below both rather than in one
 * of them, which made the two call each other.
 */
#ifndef SD_TEXT_EDITDIST_H
#define SD_TEXT_EDITDIST_H

#include <stddef.h>

/* Levenshtein distance, ignoring case; (size_t)-1 for names of 64
 * characters or more. */
size_t sd_text_edit_distance(const char *a, const char *b);

#endif
