/* Subcommands of the dtorch command line. */
#ifndef DT_TOOLS_TOOLS_H
#define DT_TOOLS_TOOLS_H
int tool_demo(int argc, char **argv);
int tool_ops(void);
#endif
