#include "fuzz/cli/cli.h"

int main(int argc, char** argv) { return detfuzz::cli::main_with_args(argc, argv); }
