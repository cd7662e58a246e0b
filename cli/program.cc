// The feedscope program.
#include "cli/crash_report.h"
#include "cli/feedscope_main.h"

int main(int argc, char** argv) {
  feedscope::install_crash_report();
  return feedscope::feedscope_main(argc, argv);
}
