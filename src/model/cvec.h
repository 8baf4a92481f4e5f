/*
 * cvec.h - control vectors (internal): the loader's one-file step, for the fuzz target.
 */
#ifndef SIFT_MODEL_CVEC_H
#define SIFT_MODEL_CVEC_H

#include "sift.h"

/* Add the directions of an open control-vector GGUF, times scale, to cv (which may be
 * empty: n_embd 0). `what` names the file in messages. SIFT_E_FORMAT for a tensor that is
 * not `direction.<layer>` F32 [n_embd] with 1 <= layer <= SIFT_CVEC_MAX_LAYER, or whose
 * n_embd differs from the vectors before it; SIFT_E_NOMEM. cv is unchanged on error. */
#define SIFT_CVEC_MAX_LAYER 4096
sift_status sift__cvec_add(sift_control_vector *cv, const sift_gguf *g, float scale, const char *what, sift_error *err);
sift_control_vector *sift__cvec_new(void);

#endif
