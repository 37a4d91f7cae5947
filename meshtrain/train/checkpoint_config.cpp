#include "meshtrain/train/checkpoint_config.h"

#include <charconv>
#include <set>

#include "meshtrain/core/error.h"
#include "meshtrain/core/parse_integer.h"
#include "meshtrain/models/checkpoint.h"
#include "meshtrain/models/safetensors.h"

namespace meshtrain {

GPT2Config gpt2_config_from_checkpoint(const std::string& path, int64_t heads) {
  SafetensorsReader reader(path);
  GPT2Config config;
  bool have_wte = false, have_wpe = false;
  std::set<int64_t> blocks;
  for (const SafetensorsEntry& e : reader.entries()) {
    const auto name = checkpoint_parameter_name(e.name);
    if (!name) continue;
    if (*name == "wte.weight" && e.shape.size() == 2) {
      config.vocab = e.shape[0];
      config.dim = e.shape[1];
      have_wte = true;
    } else if (*name == "wpe.weight" && e.shape.size() == 2) {
      config.ctx = e.shape[0];
      have_wpe = true;
    } else if (name->rfind("h.", 0) == 0) {
      const char* begin = name->data() + 2;
      const char* end = name->data() + name->size();
      int64_t block = -1;
      const auto [ptr, ec] = std::from_chars(begin, end, block);
      if (ec != std::errc() || ptr == end || *ptr != '.' || block < 0)
        throw InvalidArgument(detail::concat("'", path, "': key '", e.name,
                                             "' is not h.<block>.<name>"));
      blocks.insert(block);
    }
  }
  if (!have_wte || !have_wpe)
    throw InvalidArgument(detail::concat("'", path, "' has no 2-D ", have_wte ? "wpe" : "wte",
                                         ".weight; is it a GPT-2 checkpoint?"));
  config.layers = static_cast<int64_t>(blocks.size());
  if (!blocks.empty() && *blocks.rbegin() != config.layers - 1)
    throw InvalidArgument(detail::concat("'", path, "' has blocks up to h.", *blocks.rbegin(),
                                         " but only ", config.layers, " of them; expected h.0 to h.",
                                         config.layers - 1));
  const auto stored = reader.metadata().find("heads");
  if (stored != reader.metadata().end()) {
    const std::optional<int64_t> from_file = parse_integer<int64_t>(stored->second);
    MT_CHECK(from_file.has_value(), "'", path, "': its metadata 'heads' is '", stored->second,
             "', not a number");
    MT_CHECK(heads == 0 || heads == *from_file, "--heads ", heads, " disagrees with '", path,
             "', which was saved with ", *from_file, " heads");
    heads = *from_file;
  }
  MT_CHECK(heads > 0, "'", path, "' does not record the head count (a Hugging Face file): "
           "give --heads");
  config.heads = heads;
  config.validate();
  return config;
}

}  // namespace meshtrain
