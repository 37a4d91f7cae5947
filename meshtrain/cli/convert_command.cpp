#include <filesystem>
#include <iostream>

#include "meshtrain/cli/commands.h"
#include "meshtrain/cli/declared_flags.h"
#include "meshtrain/train/training_checkpoint.h"
#include "meshtrain/checkpoint/checkpoint_directory.h"
#include "meshtrain/checkpoint/checkpoint_reader.h"
#include "meshtrain/checkpoint/convert.h"
#include "meshtrain/checkpoint/hf_config_file.h"
#include "meshtrain/core/error.h"
#include "meshtrain/models/checkpoint.h"
#include "meshtrain/models/hf_config_path.h"

namespace meshtrain {

namespace {
struct ConvertFlags {
  std::string input, output;
  TextOptions model_options;  // what a safetensors file does not say (GPT-2's --heads)
};

void convert(const ConvertFlags& f, const ModelRegistry& models) {
  if (is_checkpoint_path(f.input)) {
    const std::string checkpoint = find_checkpoint(f.input, "convert");
    // What --save writes with the tensors (GPT-2: the head count, which the shapes do not give)
    // and beside them (config.json); a checkpoint of no trainer run (no model in its metadata)
    // exports without either.
    ModelSpecPtr model;
    if (const CheckpointReader reader(checkpoint); reader.metadata().contains("model"))
      model = checkpoint_model(reader, models);
    if (model) check_hf_config_target(*model, f.output, "convert");
    checkpoint_to_safetensors(checkpoint, f.output,
                              model ? model->safetensors_metadata()
                                    : std::map<std::string, std::string>{});
    std::cout << "wrote the parameters of " << checkpoint << " to " << f.output << "\n";
    if (const std::string config = model ? write_hf_config(*model, f.output) : "";
        !config.empty())
      std::cout << "wrote its configuration to " << config << "\n";
    return;
  }
  const std::string weights = hf_weights_path(f.input);
  const ModelSpecPtr model = models.from_safetensors(weights, f.model_options);
  // The file must load into that model, as --init FILE checks; the checkpoint then holds what
  // --init CHECKPOINT reads: the model's parameter names, without the attention-mask buffers.
  const std::unique_ptr<Model> shapes = model->build(Device::cpu());
  const SafetensorsValues loads_into_the_model(weights, shapes->parameters());
  // --init DIR takes a folder's newest checkpoint, which would not be this step 0.
  if (std::filesystem::is_directory(f.output)) {
    const auto held = complete_checkpoints(f.output);
    MT_CHECK(held.empty(), "convert: '", f.output, "' already holds checkpoints (newest ",
             held.empty() ? "" : held.back().second, "); convert into a new folder");
  }
  const std::string path = safetensors_to_checkpoint(
      weights, f.output, 0, {{"model", model_metadata(*model)}}, checkpoint_parameter_name);
  std::cout << "wrote " << path << " (" << model->describe()
            << "); start a run from it with --init " << f.output << "\n";
}
}  // namespace

void add_convert_command(CLI::App& app, const Registries& registries) {
  auto* cmd = app.add_subcommand(
      "convert",
      "Convert a distributed checkpoint to one safetensors file (Hugging Face names), or a "
      "Hugging Face model (one safetensors file or its shards) to a checkpoint");
  auto f = std::make_shared<ConvertFlags>();
  const ModelRegistry& models = registries.models;
  cmd->add_option("input", f->input,
                  "a checkpoint (step-N folder, or a folder of them) or a Hugging Face model "
                  "(safetensors file, sharded index or folder)")
      ->required()
      ->check(CLI::ExistingPath);
  cmd->add_option("output", f->output, "the safetensors file, or the folder of the new checkpoint")
      ->required()
      ->check(kNonEmptyPath);
  // A safetensors input's configuration where the file does not say it (GPT-2's --heads).
  add_model_flags(cmd, models, f->model_options);
  cmd->callback([f, &models] { convert(*f, models); });
}

}  // namespace meshtrain
