// hot_inline.h -- how the per-message path is compiled.
#pragma once

// The steps of one message, each with one caller or a few in its file: inlined so that
// a message does not pay a dozen call frames (-O2 would keep most of them). A function
// marked so is defined in the block's header (desc_check.h, completer.h, frames.h) or in
// the one .cc that calls it.
#define HOT_INLINE [[gnu::always_inline]] inline
