#include <iostream>

#include "apps/cli/commands.h"
#include "apps/train/checkpoint_config.h"
#include "apps/train/training_checkpoint.h"
#include "checkpoint/convert.h"
#include "core/error.h"

namespace meshtrain {

namespace {
struct ConvertFlags {
  std::string input, output;
  int64_t heads = 0;
};

void convert(const ConvertFlags& f) {
  if (is_checkpoint_path(f.input)) {
    const std::string checkpoint = find_checkpoint(f.input, "convert");
    checkpoint_to_safetensors(checkpoint, f.output);
    std::cout << "wrote the parameters of " << checkpoint << " to " << f.output << "\n";
    return;
  }
  MT_CHECK(f.heads > 0, "converting a safetensors file needs --heads (the file does not record "
                        "the head count)");
  const GPT2Config model = gpt2_config_from_checkpoint(f.input, f.heads);
  const std::string path =
      safetensors_to_checkpoint(f.input, f.output, 0, {{"model", model_metadata(model)}});
  std::cout << "wrote " << path << " (GPT-2 " << model.describe()
            << "); start a run from it with --init " << f.output << "\n";
}
}  // namespace

void add_convert_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "convert",
      "Convert a distributed checkpoint to one safetensors file (Hugging Face GPT-2 names), or a "
      "safetensors file to a checkpoint");
  auto f = std::make_shared<ConvertFlags>();
  cmd->add_option("input", f->input, "a checkpoint (step-N folder, or a folder of them) or a "
                                     "safetensors file")
      ->required()
      ->check(CLI::ExistingPath);
  cmd->add_option("output", f->output, "the safetensors file, or the folder of the new checkpoint")
      ->required();
  cmd->add_option("--heads", f->heads, "attention heads (safetensors input only)");
  cmd->callback([f] { convert(*f); });
}

}  // namespace meshtrain
