#include <filesystem>
#include <iostream>

#include "apps/cli/commands.h"
#include "meshtrain/train/checkpoint_config.h"
#include "meshtrain/train/training_checkpoint.h"
#include "meshtrain/checkpoint/checkpoint_directory.h"
#include "meshtrain/checkpoint/checkpoint_reader.h"
#include "meshtrain/checkpoint/convert.h"
#include "meshtrain/core/error.h"
#include "meshtrain/models/checkpoint.h"
#include "meshtrain/models/gpt2.h"

namespace meshtrain {

namespace {
struct ConvertFlags {
  std::string input, output;
  int64_t heads = 0;
};

void convert(const ConvertFlags& f) {
  if (is_checkpoint_path(f.input)) {
    const std::string checkpoint = find_checkpoint(f.input, "convert");
    // The head count, which the tensors' shapes do not give, as --save writes it; a checkpoint
    // of no trainer run (no model in its metadata) exports without it.
    std::map<std::string, std::string> metadata;
    if (const CheckpointReader reader(checkpoint); reader.metadata().contains("model"))
      metadata["heads"] = std::to_string(checkpoint_model(reader).heads);
    checkpoint_to_safetensors(checkpoint, f.output, metadata);
    std::cout << "wrote the parameters of " << checkpoint << " to " << f.output << "\n";
    return;
  }
  const GPT2Config model = gpt2_config_from_checkpoint(f.input, f.heads);
  // The file must load into that model, as --init FILE checks; the checkpoint then holds what
  // --init CHECKPOINT reads: the model's parameter names, without the attention-mask buffers.
  GPT2 shapes(model, GPT2Options{.materialize = false});
  const SafetensorsValues loads_into_the_model(f.input, shapes.parameters());
  // --init DIR takes a folder's newest checkpoint, which would not be this step 0.
  if (std::filesystem::is_directory(f.output)) {
    const auto held = complete_checkpoints(f.output);
    MT_CHECK(held.empty(), "convert: '", f.output, "' already holds checkpoints (newest ",
             held.empty() ? "" : held.back().second, "); convert into a new folder");
  }
  const std::string path = safetensors_to_checkpoint(
      f.input, f.output, 0, {{"model", model_metadata(model)}}, checkpoint_parameter_name);
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
      ->required()
      ->check(kNonEmptyPath);
  cmd->add_option("--heads", f->heads, "attention heads (safetensors input only)");
  cmd->callback([f] { convert(*f); });
}

}  // namespace meshtrain
