// meshtrain: the command line (meshtrain/cli/command_line.h) with the built-in model families and
// strategy plugins.
#include "meshtrain/cli/command_line.h"

int main(int argc, char** argv) {
  return meshtrain::run_command_line(argc, argv, meshtrain::builtin_registries());
}
