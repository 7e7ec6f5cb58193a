// The text of `tfmpirun --help`: description, usage line, the environment
// variables tfmpirun sets, and examples. Kept apart from the option
// definitions so launch_options.cc stays about parsing.
#pragma once

namespace CLI {
class App;
}

namespace tfmpi::launcher {

// Sets the description, footer and a formatter that shows `-np` (which CLI11
// cannot declare) beside -n/--num-proc and a usage line with COMMAND.
void ConfigureHelp(CLI::App* app);

}  // namespace tfmpi::launcher
