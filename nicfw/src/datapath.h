// datapath.h -- the per-message path's shared blocks, for the .cc files that use them:
// descriptor checks (desc_check.h), completion (completer.h), frames on the link
// (frames.h). All inline (hot_inline.h).
#pragma once

#include "completer.h"
#include "desc_check.h"
#include "frames.h"
#include "hot_inline.h"
