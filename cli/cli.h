// The `trit` command: one file per verb, each with its own getopt_long flags and --help.
// Verbs return the process exit code: 0 done, 1 the work failed, 2 the command line is wrong.
#ifndef TRIT_CLI_H
#define TRIT_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "trit/trit.h"
#include "trit/train.h"

enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

int trit_cli_train(int argc, char **argv);
// The flags of `trit train` into *cfg (not resolved): -1 when training should go ahead, else
// the exit code (--help printed, or a usage error reported). Split out so it can be fuzzed.
int trit_cli_train_parse(int argc, char **argv, trit_train_config *cfg);
// The same for another verb taking the training flags: its name in messages, its --help, and
// (positional not NULL) one argument that is not a flag into *positional (NULL when none).
int trit_cli_train_parse_as(const char *verb, void (*usage)(FILE *), int argc, char **argv, trit_train_config *cfg,
                            const char **positional);
// Run the training of cfg and print its outcome line; the exit code.
int trit_cli_train_run(const char *verb, const trit_train_config *cfg);
int trit_cli_finetune(int argc, char **argv);
int trit_cli_embed(int argc, char **argv);
int trit_cli_sample(int argc, char **argv);
int trit_cli_eval(int argc, char **argv);
int trit_cli_info(int argc, char **argv);
int trit_cli_plot(int argc, char **argv);
int trit_cli_prepare(int argc, char **argv);
int trit_cli_bench(int argc, char **argv);
int trit_cli_quantize(int argc, char **argv);
int trit_cli_export(int argc, char **argv);
int trit_cli_tokenize(int argc, char **argv);
// A --tokenizer argument: gpt2:DIR (GPT-2's files), a run or data directory (its
// tokenizer.bin) or a tokenizer file. NULL with the reason in trit_last_error().
trit_tokenizer *cli_open_tokenizer(const char *spec);
int trit_cli_import(int argc, char **argv);
int trit_cli_merge(int argc, char **argv);
int trit_cli_merge_shards(int argc, char **argv);

// Gives OpenMP a bounded spin before its threads sleep, unless the user chose a wait policy:
// re-executes the program once with the limit in its environment (cli/wait_policy.c).
void trit_cli_default_wait_policy(char **argv);
// One line on how this process's OpenMP threads wait, for logs and benchmarks.
void trit_cli_describe_wait_policy(char *buf, size_t n);

// "trit <verb>: <message>" on stderr; returns `code`.
int cli_error(const char *verb, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
// The same with trit_last_error() as the message.
int cli_fail(const char *verb, int code);
// Report a getopt_long '?' or ':' result for argv (names the offending flag); returns CLI_USAGE.
int cli_bad_option(const char *verb, int c, char **argv);
// getopt_long over argv with the verb's options; resets getopt's state first.
void cli_getopt_reset(void);
// Parse a flag value as a number (full-string check) in its allowed range [lo, hi] (`open`:
// TRIT_OPEN_LO/HI make an end exclusive); on failure print a message naming the flag and the
// range and return false. Every numeric flag of every verb goes through these.
bool cli_int(const char *verb, const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out);
bool cli_double(const char *verb, const char *flag, const char *s, double lo, double hi, unsigned open, double *out);
// --kv-cache f32|f16: how the decoder stores keys and values.
bool cli_kv_cache(const char *verb, const char *s, trit_dtype *out);
// Limits shared by the verbs (those of `trit train` are in its flag table, src/train/config.c).
#define CLI_MAX_THREADS 4096
#define CLI_MAX_BATCH (INT64_C(1) << 20)
#define CLI_MAX_SEQ (INT64_C(1) << 20)
// After getopt_long for a verb that reads a checkpoint: nothing left over in argv and --ckpt
// given. Returns CLI_OK, or CLI_USAGE after saying what is wrong.
int cli_check_ckpt_args(const char *verb, int argc, char **argv, const char *ckpt);
// Whether path names an existing directory.
bool cli_is_dir(const char *path);

#endif
