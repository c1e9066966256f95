// trit finetune BASE: `trit train --init-from BASE` with the verb's own checks. BASE is resolved by
// trit_base_probe/trit_base_load (src/train/base.c: trit run directories today); its weights,
// architecture and tokenizer are taken, the optimizer and schedule start fresh, and every flag
// of `trit train` applies (precision, schedule, accumulation, checkpoints, metrics, --freeze,
// --recompute, --task embed, ...). `trit finetune --resume DIR` continues a fine-tune.
#include "cli.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *fp) {
    fprintf(fp,
            "usage: trit finetune BASE --data FILE|DIR --out DIR [options]\n"
            "       trit finetune BASE --task embed --data PAIRS.jsonl --out DIR [options]\n"
            "       trit finetune --resume DIR\n\n"
            "Fine-tunes BASE, a trit run directory (written by `trit train` or `trit quantize`) or a Hugging\n"
            "Face GPT-2 directory with its tokenizer files (vocab.json + merges.txt or tokenizer.json), on --data\n"
            "tokenized with BASE's tokenizer: its weights as trained, its architecture, a fresh optimizer and\n"
            "schedule. --freeze GLOB (repeatable; --unfreeze re-opens) keeps parameters fixed by their GPT-2\n"
            "names, e.g. --freeze 'h.*.attn.*' --unfreeze 'h.0.attn.*'. --task embed trains a sentence-\n"
            "embedding model from JSON Lines of {\"anchor\": ..., \"positive\": ...} pairs (`trit embed` prints\n"
            "its vectors).\n\noptions (those of `trit train`; defaults in parentheses):\n");
    for (const trit_train_flag *f = trit_train_flags(); f->name; f++)
        if (strcmp(f->name, "init-from") != 0) fprintf(fp, "  --%-20s %s\n", f->name, f->help);
    fprintf(fp, "  --%-20s %s\n", "help", "this text");
}

// With --resume, BASE may be repeated; it must be the base the run was started from.
static int check_resume_base(const trit_train_config *cfg, const char *base) {
    if (!base) return -1;
    trit_train_config saved;
    if (trit_train_run_info(cfg->resume, &saved, NULL) != TRIT_OK) return cli_fail("finetune", CLI_FAIL);
    if (strcmp(saved.init_from, base) != 0)
        return cli_error("finetune", CLI_USAGE, "'%s' was fine-tuned from '%s', not from '%s': leave BASE out to resume it",
                         cfg->resume, saved.init_from[0] ? saved.init_from : "(no base)", base);
    return -1;
}

int trit_cli_finetune(int argc, char **argv) {
    trit_train_config cfg;
    const char *base = NULL;
    int rc = trit_cli_train_parse_as("finetune", usage, argc, argv, &cfg, &base);
    if (rc >= 0) return rc;
    if (cfg.init_from[0])
        return cli_error("finetune", CLI_USAGE, "--init-from is BASE here: pass it as the first argument, not as a flag");
    if (cfg.resume[0]) {
        rc = check_resume_base(&cfg, base);
        return rc >= 0 ? rc : trit_cli_train_run("finetune", &cfg);
    }
    if (!base)
        return cli_error("finetune", CLI_USAGE, "no BASE given: pass the run to start from first, e.g. `trit finetune "
                         "run --data more.txt --out run-ft` (see trit finetune --help)");
    if (!cfg.data[0])
        return cli_error("finetune", CLI_USAGE, "no --data given: pass the text file, `trit prepare` directory or (with "
                         "--task embed) the pairs file to fine-tune on");
    if (!cfg.out[0])
        return cli_error("finetune", CLI_USAGE, "no --out given: name the directory of the fine-tuned run (BASE is "
                         "left as it is)");
    trit_base_kind kind;
    if (trit_base_probe(base, &kind) != TRIT_OK) return cli_fail("finetune", CLI_FAIL);
    if (trit_train_config_set(&cfg, "init-from", base) != TRIT_OK) return cli_fail("finetune", CLI_USAGE);
    return trit_cli_train_run("finetune", &cfg);
}
