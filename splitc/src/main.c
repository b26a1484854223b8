/* main.c -- the main() of a Split-C program (libsplitc_main.a): the runtime runs the
 * program's splitc_main between start-up and the end of the job. */
#include "splitc.h"

int main(int argc, char **argv) { return splitc_run(argc, argv, splitc_main); }
