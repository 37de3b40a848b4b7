/* verbs.h — entry points of the verbs; each gets argv starting at the verb. */
#ifndef SV_CLI_VERBS_H
#define SV_CLI_VERBS_H

int sv_cmd_compile(int argc, char **argv);
int sv_cmd_match(int argc, char **argv);
int sv_cmd_sample(int argc, char **argv);
int sv_cmd_maskbench(int argc, char **argv);
int sv_cmd_generate(int argc, char **argv);
int sv_cmd_serve(int argc, char **argv);
int sv_cmd_batch(int argc, char **argv);

#endif
