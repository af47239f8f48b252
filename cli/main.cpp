// sandglass: the command-line client of sandglassd (see commands.hpp).
#include "cli/commands.hpp"

int main(int argc, char** argv) { return sandglass::cli::run(argc, argv); }
