// The error a rank gets when another rank's failure ends its op (a world abort, a group failed
// by a mismatch, a timeout or a destroyed communicator elsewhere). spawn_ranks reports a root
// cause in preference to these secondary failures.
#pragma once

#include "meshtrain/core/error.h"

namespace meshtrain {

class PeerFailure : public CommError {
 public:
  using CommError::CommError;
};

}  // namespace meshtrain
