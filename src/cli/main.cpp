// The `isomer` command. Every failure is caught here and printed as one line
// ("isomer: error: ..."), with a non-zero exit.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "cli/commands.h"
#include "ir/error.h"
#include "ir/error_line.h"

int main(int argc, char** argv) {
  CLI::App app{"isomer: a superoptimizer for tensor programs (ONNX in, faster equivalent ONNX out)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("isomer 0.1.0"));
  isomer::cli::add_commands(app);
  try {
    app.parse(argc, argv);
    return isomer::cli::run_selected(app);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const isomer::Error& e) {
    std::fprintf(stderr, "isomer: error: %s\n", isomer::one_line_message(e.what()).c_str());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "isomer: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "isomer: error: %s\n", isomer::one_line_message(e.what()).c_str());
    return 1;
  }
}
