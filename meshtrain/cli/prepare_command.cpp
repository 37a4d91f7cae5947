#include <iostream>

#include "meshtrain/checkpoint/durable_files.h"
#include "meshtrain/cli/commands.h"
#include "meshtrain/core/error.h"
#include "meshtrain/models/token_file.h"

namespace meshtrain {

void add_prepare_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("prepare", "Turn a text file into a byte-level token file");
  auto text = std::make_shared<std::string>();
  auto tokens = std::make_shared<std::string>();
  auto format = std::make_shared<std::string>(token_format_name(TokenFormat::gpt2));
  cmd->add_option("text", *text, "UTF-8 (or any) text file")->required()->check(CLI::ExistingFile);
  cmd->add_option("tokens", *tokens, "token file to write (llm.c format, vocab 256)")
      ->required()
      ->check(kNonEmptyPath);
  // Checked while parsing, so that a bad name stops the command before it writes anything.
  const CLI::Validator known_format(
      [](std::string& value) {
        try {
          parse_token_format(value);
          return std::string();
        } catch (const InvalidArgument& e) {
          return std::string(e.what());
        }
      },
      "");
  cmd->add_option("--format", *format,
                  "llm.c token format: gpt-2 (uint16 tokens) or llama-3 (uint32 tokens)")
      ->type_name("gpt-2|llama-3")
      ->check(known_format)
      ->capture_default_str();
  cmd->callback([text, tokens, format] {
    check_output_is_not_input(*tokens, "the token file", *text, "the text file");
    AtomicFile out(*tokens);  // a failed prepare leaves an existing token file as it was
    const int64_t count =
        prepare_byte_tokens(*text, out.partial_path(), parse_token_format(*format));
    out.commit();
    std::cout << "wrote " << count << " tokens to " << *tokens << " (llm.c " << *format
              << " format)\n";
  });
}

}  // namespace meshtrain
