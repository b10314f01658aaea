#pragma once

#include <string>

namespace detfuzz::cli {

// The whole command line; returns the exit status.
int main_with_args(int argc, char** argv);

// "90", "90s", "1500ms", "5m", "1h" -> seconds; Error{usage} naming `option` otherwise.
double parse_duration(const std::string& text, const std::string& option);

}  // namespace detfuzz::cli
