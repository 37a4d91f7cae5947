// Typed reads of the fields of JSON a file or a peer gave us (a checkpoint's index, a shard report,
// a checkpoint's metadata), with errors that say where: "checkpoint index 'p': tensor 'x':
// slice 2: 'offset' must be an array of integers in [0, 2^63), got ...". IoError: such JSON is
// data read back, and a wrong field means the data is not what it should be.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "meshtrain/core/tensor.h"

namespace meshtrain {

class JsonFields {
 public:
  // `source` starts every message: "checkpoint index 'ckpt/step-00000004/index.json'".
  explicit JsonFields(std::string source) : source_(std::move(source)) {}

  // `where` follows the source, ending in ": " ("tensor 'wte.weight': "), or is empty.
  [[noreturn]] void fail(const std::string& where, const std::string& why) const;
  const nlohmann::json& field(const nlohmann::json& object, const char* key,
                              const std::string& where = "") const;
  uint64_t unsigned_field(const nlohmann::json& object, const char* key,
                          const std::string& where = "") const;
  // An unsigned integer of at most `max`: how a count is range-checked before it is converted or
  // used in arithmetic.
  uint64_t bounded_field(const nlohmann::json& object, const char* key, uint64_t max,
                         const std::string& where = "") const;
  std::string string_field(const nlohmann::json& object, const char* key,
                           const std::string& where = "") const;
  // Dims in [0, 2^63), so that they fit Shape's int64_t.
  Shape shape_field(const nlohmann::json& object, const char* key,
                    const std::string& where = "") const;
  const nlohmann::json& object_field(const nlohmann::json& object, const char* key,
                                     const std::string& where = "") const;

 private:
  std::string source_;
};

}  // namespace meshtrain
