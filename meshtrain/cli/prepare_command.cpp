#include <iostream>

#include "meshtrain/cli/commands.h"
#include "meshtrain/checkpoint/durable_files.h"
#include "meshtrain/models/token_file.h"

namespace meshtrain {

void add_prepare_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("prepare", "Turn a text file into a byte-level token file");
  auto text = std::make_shared<std::string>();
  auto tokens = std::make_shared<std::string>();
  cmd->add_option("text", *text, "UTF-8 (or any) text file")->required()->check(CLI::ExistingFile);
  cmd->add_option("tokens", *tokens, "token file to write (llm.c format, vocab 256)")
      ->required()
      ->check(kNonEmptyPath);
  cmd->callback([text, tokens] {
    check_output_is_not_input(*tokens, "the token file", *text, "the text file");
    AtomicFile out(*tokens);  // a failed prepare leaves an existing token file as it was
    const int64_t count = prepare_byte_tokens(*text, out.partial_path());
    out.commit();
    std::cout << "wrote " << count << " tokens to " << *tokens << "\n";
  });
}

}  // namespace meshtrain
