#include "meshtrain/checkpoint/json_fields.h"

#include <cstdint>

#include "meshtrain/core/error.h"

namespace meshtrain {

void JsonFields::fail(const std::string& where, const std::string& why) const {
  throw IoError(detail::concat(source_, ": ", where, why));
}

const nlohmann::json& JsonFields::field(const nlohmann::json& object, const char* key,
                                        const std::string& where) const {
  if (!object.is_object()) fail(where, "expected a JSON object, got " + object.dump());
  const auto it = object.find(key);
  if (it == object.end()) fail(where, detail::concat("missing field '", key, "'"));
  return *it;
}

uint64_t JsonFields::unsigned_field(const nlohmann::json& object, const char* key,
                                    const std::string& where) const {
  return bounded_field(object, key, UINT64_MAX, where);
}

uint64_t JsonFields::bounded_field(const nlohmann::json& object, const char* key, uint64_t max,
                                   const std::string& where) const {
  const nlohmann::json& value = field(object, key, where);
  if (!value.is_number_unsigned() || value.get<uint64_t>() > max)
    fail(where, detail::concat("'", key, "' must be a non-negative integer",
                               max == UINT64_MAX ? "" : detail::concat(" of at most ", max),
                               ", got ", value.dump()));
  return value.get<uint64_t>();
}

std::string JsonFields::string_field(const nlohmann::json& object, const char* key,
                                     const std::string& where) const {
  const nlohmann::json& value = field(object, key, where);
  if (!value.is_string())
    fail(where, detail::concat("'", key, "' must be a string, got ", value.dump()));
  return value.get<std::string>();
}

Shape JsonFields::shape_field(const nlohmann::json& object, const char* key,
                              const std::string& where) const {
  const nlohmann::json& value = field(object, key, where);
  Shape shape;
  if (value.is_array())
    for (const auto& d : value) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > INT64_MAX) break;
      shape.push_back(d.get<int64_t>());
    }
  if (!value.is_array() || shape.size() != value.size())
    fail(where, detail::concat("'", key, "' must be an array of integers in [0, 2^63), got ",
                               value.dump()));
  return shape;
}

const nlohmann::json& JsonFields::object_field(const nlohmann::json& object, const char* key,
                                               const std::string& where) const {
  const nlohmann::json& value = field(object, key, where);
  if (!value.is_object()) fail(where, detail::concat("'", key, "' must be an object"));
  return value;
}

}  // namespace meshtrain
