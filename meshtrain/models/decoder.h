// Decoder: incremental inference over a whole single-rank model with a key/value cache, what
// sampling needs of a model family (meshtrain/models/sampling.h). Positions are encoded from 0;
// each call appends tokens and returns the logits after the last one.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace meshtrain {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual int64_t vocab() const = 0;
  // The positions the cache holds: the longest window it encodes.
  virtual int64_t context() const = 0;
  // Positions encoded so far (cached): the next token gets this position.
  virtual int64_t length() const = 0;
  // Forgets the cache: the next tokens start at position 0.
  virtual void reset() = 0;
  // Encodes tokens at positions [length(), length() + tokens.size()) and returns the logits [V] of
  // the token after the last one. InvalidArgument for no tokens, an id outside the vocabulary, or
  // positions past context().
  virtual std::vector<float> append(std::span<const int32_t> tokens) = 0;
};

}  // namespace meshtrain
