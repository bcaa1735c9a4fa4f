/* Subcommands of the dtorch command line. */
#ifndef TOOLS_TOOLS_H
#define TOOLS_TOOLS_H
int tool_demo(int argc, char **argv);
int tool_ops(void);
#endif
