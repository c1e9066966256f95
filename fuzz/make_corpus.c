// Writes the fuzzers' seed corpora with trit's own writers, so the seeds are the files trit
// makes (small: the tiny model of fuzz_util.h, a few tokens): `fuzz_make_corpus fuzz/corpus`.
// Text seeds (argv lists, JSON, metrics lines) are written out as given here.
#include "fuzz_util.h"
#include "train/train_internal.h"
#include "io/tokenizer_gpt2.h"
#include "trit/interop.h"

#include <errno.h>
#include <sys/stat.h>

static const char *root;

static const char *seed_path(const char *harness, const char *name) {
    static char path[1024];
    snprintf(path, sizeof path, "%s/%s", root, harness);
    if (mkdir(path, 0755) != 0 && errno != EEXIST) abort();
    snprintf(path, sizeof path, "%s/%s/%s", root, harness, name);
    return path;
}

static void check(trit_status s, const char *what) {
    if (s == TRIT_OK) return;
    fprintf(stderr, "make_corpus: %s: %s\n", what, trit_last_error());
    exit(1);
}

static void write_seed(const char *harness, const char *name, const void *data, size_t n) {
    check(trit_file_write_atomic(seed_path(harness, name), data, n), name);
}

static trit_tensor *quantized(trit_dtype dt, int64_t group, trit_quant_scheme scheme, int64_t dq) {
    const int64_t shape[2] = {2, 64};
    trit_tensor *w = trit_tensor_new(TRIT_F32, 2, shape);
    trit_tensor_fill_normal(w, 0.0, 0.05, 3, (uint64_t)dt);
    trit_quant_spec s = trit_quant_spec_default(dt);
    s.group_size = group, s.scheme = scheme, s.double_quant_block = dq;
    trit_tensor *q = trit_quantize(w, &s);
    if (!q) check(TRIT_ERR_INVALID, "quantize");
    trit_tensor_free(w);
    return q;
}

static void safetensors_seeds(void) {
    const int64_t s1[1] = {3}, s2[2] = {2, 2};
    trit_tensor *a = trit_tensor_new(TRIT_F32, 1, s1), *b = trit_tensor_new(TRIT_BF16, 2, s2),
                *c = trit_tensor_new(TRIT_I32, 1, s1);
    trit_safetensors_entry e[3] = {{"a", a}, {"b.weight", b}, {"c", c}};
    trit_safetensors_kv meta[1] = {{"format", "pt"}};
    check(trit_safetensors_write(seed_path("fuzz_safetensors", "plain.safetensors"), e, 3, meta, 1), "plain");
    trit_tensor *q[4] = {quantized(TRIT_QINT4, 32, TRIT_QSCHEME_AFFINE, 0),
                         quantized(TRIT_NF4, 64, TRIT_QSCHEME_SYMMETRIC, 2),
                         quantized(TRIT_QINT8, TRIT_QGROUP_CHANNEL, TRIT_QSCHEME_SYMMETRIC, 0),
                         quantized(TRIT_F8_E4M3, TRIT_QGROUP_CHANNEL, TRIT_QSCHEME_SYMMETRIC, 0)};
    trit_safetensors_entry qe[5] = {{"w4", q[0]}, {"nf4", q[1]}, {"w8", q[2]}, {"fp8", q[3]}, {"a", a}};
    check(trit_safetensors_write_quantized(seed_path("fuzz_safetensors", "quant.safetensors"), qe, 5, NULL, 0),
          "quantized");
    for (int i = 0; i < 4; i++) trit_tensor_free(q[i]);
    trit_tensor_free(a), trit_tensor_free(b), trit_tensor_free(c);
}

static void model_seeds(void) {
    trit_gpt *m;
    trit_optim *o;
    fuzz_tiny_model(&m, &o);
    check(trit_checkpoint_save_model(m, seed_path("fuzz_safetensors", "model.safetensors"), 3), "model");
    trit_train_state st;
    memset(&st, 0, sizeof st);
    trit_train_config_init(&st.config);
    const char *flags[][2] = {{"data", "input.txt"}, {"layers", "1"}, {"heads", "2"}, {"dim", "4"}, {"seq", "8"}, {"steps", "4"}};
    for (int i = 0; i < 6; i++) check(trit_train_config_set(&st.config, flags[i][0], flags[i][1]), "config");
    check(trit_train_config_resolve(&st.config), "resolve");
    st.step = 3, st.data_batches = 3, st.tokenizer_crc = 0x12345678;
    check(trit_state_save(seed_path("fuzz_train_state", "plain.bin"), &st, m, o), "state");
    st.has_scaler = true;
    check(trit_loss_scaler_init(&st.scaler, 65536.0, true), "scaler");
    st.skipped = 1, st.skip_streak = 1;
    check(trit_state_save(seed_path("fuzz_train_state", "scaler.bin"), &st, m, o), "state with scaler");
    char *json = trit_train_config_to_json(&st.config);
    write_seed("fuzz_config_json", "train.json", json, strlen(json));
    free(json);
    json = trit_checkpoint_config_to_json(trit_gpt_get_config(m));
    write_seed("fuzz_config_json", "model.json", json, strlen(json));
    free(json);
    trit_optim_free(o);
    trit_gpt_free(m);
}

static void shard_seeds(void) {
    int32_t tokens[20];
    for (int i = 0; i < 20; i++) tokens[i] = (i * 7919) % 65536;
    check(trit_shard_write(seed_path("fuzz_token_shard", "twenty.bin"), tokens, 20), "shard");
    check(trit_shard_write(seed_path("fuzz_token_shard", "empty.bin"), tokens, 0), "empty shard");
}

// A tokenizer file with a text after it, as fuzz_tokenizer_file reads its input.
static void tokenizer_seed(const trit_tokenizer *tok, const char *name, const char *text) {
    const char *tmp = seed_path("fuzz_tokenizer_file", name);
    check(trit_tokenizer_save(tok, tmp), name);
    uint8_t *file;
    size_t n;
    check(trit_file_read_all(tmp, &file, &n), name);
    const size_t k = strlen(text);
    uint8_t *all = malloc(n + k);
    memcpy(all, file, n);
    memcpy(all + n, text, k);
    write_seed("fuzz_tokenizer_file", name, all, n + k);
    free(all), free(file);
}

static void tokenizer_seeds(void) {
    static const char text[] = "hello world, hello there: the fox and the dog\n";
    trit_tokenizer *c = trit_tokenizer_train_char(text, sizeof text - 1);
    trit_tokenizer *b = trit_tokenizer_train_bpe(text, sizeof text - 1, 270);
    if (!c || !b) check(TRIT_ERR_INVALID, "tokenizer");
    tokenizer_seed(c, "char.tok", "hello the dog");
    tokenizer_seed(b, "bpe.tok", "hello world \xff\x00 caf\xc3\xa9");
    trit_tokenizer_free(c), trit_tokenizer_free(b);
    static const char *texts[] = {"The quick brown fox jumps over the lazy dog.\n",
                                  "it's 123+456=579   \t\n\n caf\xc3\xa9 \xe2\x82\xac\xf0\x9f\x98\x80",
                                  "\xff\xfe\x00\x01 binary \xc0\x80 bytes", "abc xyz 0123\n"};
    for (int i = 0; i < 4; i++) {
        char name[16];
        snprintf(name, sizeof name, "text%d", i);
        write_seed("fuzz_tokenizer_encode", name, texts[i], strlen(texts[i]) + (i == 2 ? 6 : 0));
    }
}

// GPT-2's alphabet spelling of byte b (JSON-escaped), as in encoder.json.
static size_t gpt2_spell(unsigned b, char *out) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
    unsigned c = b, k = 0;
    if (!printable)
        for (unsigned x = 0, n = 0; x <= b; x++) {
            const bool px = (x >= 33 && x <= 126) || (x >= 161 && x <= 172) || x >= 174;
            if (!px) c = 256 + n++;
        }
    if (c == '"' || c == '\\') out[k++] = '\\';
    if (c < 0x80) {
        out[k++] = (char)c;
    } else {
        out[k++] = (char)(0xC0 | c >> 6);
        out[k++] = (char)(0x80 | (c & 0x3F));
    }
    return k;
}

// fuzz_tokenizer_gpt2's inputs: a small GPT-2 vocabulary (the 256 bytes, a few merges,
// <|endoftext|>) as encoder.json + vocab.bpe and as tokenizer.json, each with a text; and the
// same tokenizer as a tokenizer file for fuzz_tokenizer_file.
static void gpt2_seeds(void) {
    static const char merges[] = "#version: 0.2\nh e\nl l\nhe ll\nhell o\n\xc4\xa0 h\n\xc4\xa0h e\n\xc4\xa0he ll\n"
                                 "\xc4\xa0hell o\n";
    static const char *const made[] = {"he", "ll", "hell", "hello", "\xc4\xa0h", "\xc4\xa0he", "\xc4\xa0hell", NULL};
    static const char text[] = "hello <|endoftext|> hello's  \t\r\n caf\xc3\xa9 \xf0\x9f\x98\x80 123 \xff";
    char *vocab = malloc(1 << 14);
    size_t k = 0;
    int id = 0;
    vocab[k++] = '{';
    for (int pass = 0; pass < 2; pass++)
        for (unsigned b = 0; b < 256; b++) {
            const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
            if (printable != (pass == 0)) continue;
            vocab[k++] = '"';
            k += gpt2_spell(b, vocab + k);
            k += (size_t)sprintf(vocab + k, "\": %d, ", id++);
        }
    for (int m = 0; made[m]; m++) k += (size_t)sprintf(vocab + k, "\"%s\": %d, ", made[m], id++);
    k += (size_t)sprintf(vocab + k, "\"\xc4\xa0hello\": %d, \"<|endoftext|>\": %d}", id, id + 1);
    char *seed = malloc(1 << 15);
    size_t n = 0;
    seed[n++] = 'E';
    memcpy(seed + n, vocab, k), n += k, seed[n++] = 0;
    memcpy(seed + n, merges, sizeof merges - 1), n += sizeof merges - 1, seed[n++] = 0;
    memcpy(seed + n, text, sizeof text - 1), n += sizeof text - 1;
    write_seed("fuzz_tokenizer_gpt2", "encoder_vocab_bpe", seed, n);
    trit_tokenizer *tok = trit_tokenizer_gpt2_parse(vocab, k, "encoder.json", merges, sizeof merges - 1, "vocab.bpe");
    if (!tok) check(TRIT_ERR_INVALID, "gpt2 tokenizer");
    tokenizer_seed(tok, "gpt2.tok", text);
    trit_tokenizer_free(tok);
    n = (size_t)sprintf(seed, "H{\"added_tokens\": [{\"id\": %d, \"content\": \"<|endoftext|>\", \"special\": true}], "
                        "\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false}, "
                        "\"model\": {\"type\": \"BPE\", \"vocab\": %.*s, \"merges\": [\"h e\", [\"l\", \"l\"], "
                        "\"he ll\", \"hell o\", \"\xc4\xa0 h\", \"\xc4\xa0h e\", \"\xc4\xa0he ll\", \"\xc4\xa0hell o\"]}}", id + 1, (int)k, vocab);
    seed[n++] = 0;
    memcpy(seed + n, text, sizeof text - 1), n += sizeof text - 1;
    write_seed("fuzz_tokenizer_gpt2", "tokenizer_json", seed, n);
    free(seed);
    free(vocab);
}

// argv lists: NUL-separated flags after "train".
static void args_seeds(void) {
    static const char a0[] = "--layers\0" "2\0--dim\0" "64\0--heads\0" "4\0--steps\0" "10\0--quiet\0" "1";
    static const char a1[] = "--data\0input.txt\0--tokenizer\0bpe\0--vocab\0" "512\0--seq\0" "128\0--batch\0" "8\0"
                             "--total-batch-tokens\0" "2048\0--lr=3e-4\0--min-lr\0" "3e-5\0--precision\0bf16\0"
                             "--master-weights\0off\0--rounding\0stochastic";
    static const char a2[] = "--ternary\0--subln\0--norm\0rms\0--mlp\0swiglu\0--pos\0rope\0--qat-acts\0token\0"
                             "--terngrad\0--terngrad-clip\0" "2.5\0--schedule\0two-stage\0--stage2-at\0" "0.5";
    static const char a3[] = "--resume\0run\0--steps\0" "20\0--eval-every\0" "5\0--ckpt-every\0" "5\0--threads\0" "2";
    static const char a4[] = "--qat\0int4\0--group\0" "64\0--loss-scale\0" "1024\0--matmul-precision\0medium\0"
                             "--order\0sequential\0--val-fraction\0" "0.05\0--dropout\0" "0.1\0--bias\0" "0";
    static const char a5[] = "--help";
    const struct { const char *name, *data; size_t n; } seeds[] = {
        {"small", a0, sizeof a0 - 1}, {"text", a1, sizeof a1 - 1}, {"bitnet", a2, sizeof a2 - 1},
        {"resume", a3, sizeof a3 - 1}, {"qat", a4, sizeof a4 - 1}, {"help", a5, sizeof a5 - 1}};
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++)
        write_seed("fuzz_train_args", seeds[i].name, seeds[i].data, seeds[i].n);
}

// A tiny GPT as llm.c files and as a transformers directory (config.json, NUL, model.safetensors).
static void interop_seeds(void) {
    const trit_gpt_config g = fuzz_tiny_gpt_config();
    trit_gpt *m = trit_gpt_new(&g, 1);
    if (!m) abort();
    check(trit_export_llmc(m, 3, seed_path("fuzz_llmc", "model_fp32.bin")), "llmc fp32");
    check(trit_export_llmc(m, 5, seed_path("fuzz_llmc", "model_bf16.bin")), "llmc bf16");
    trit_tokenizer *tok = trit_tokenizer_train_char("hello, world!\n", 14);
    check(trit_llmc_vocab_write(tok, 0, seed_path("fuzz_llmc", "tokenizer.bin")), "llmc tokenizer");
    trit_tokenizer_free(tok);
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/trit-corpus-hf-%ld", (long)getpid());
    check(trit_export_hf_gpt2(m, dir), "hf export");
    char path[128];
    uint8_t *cfg = NULL, *st = NULL;
    size_t ncfg = 0, nst = 0;
    snprintf(path, sizeof path, "%s/config.json", dir);
    check(trit_file_read_all(path, &cfg, &ncfg), "config.json");
    unlink(path);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    check(trit_file_read_all(path, &st, &nst), "model.safetensors");
    unlink(path);
    rmdir(dir);
    uint8_t *seed = malloc(ncfg + 1 + nst);
    if (!seed) abort();
    memcpy(seed, cfg, ncfg);
    seed[ncfg] = 0;
    memcpy(seed + ncfg + 1, st, nst);
    write_seed("fuzz_hf_gpt2", "tiny.bin", seed, ncfg + 1 + nst);
    write_seed("fuzz_hf_gpt2", "config_only.json", cfg, ncfg);
    free(seed), free(cfg), free(st);
    trit_gpt_free(m);
    // GGUF: a tiny model at width 32 (q8_0's block) with a character tokenizer, and without one.
    trit_gpt_config wide = g;
    wide.n_embd = 32;
    static const char chars[] = "abcdefghijkl";  // the model's 12 tokens
    if (!(m = trit_gpt_new(&wide, 1)) || !(tok = trit_tokenizer_train_char(chars, sizeof chars - 1))) abort();
    check(trit_export_gguf(m, tok, TRIT_F32, seed_path("fuzz_gguf", "f32_char.gguf")), "gguf f32");
    check(trit_export_gguf(m, NULL, TRIT_Q8_0, seed_path("fuzz_gguf", "q8_0.gguf")), "gguf q8_0");
    trit_tokenizer_free(tok);
    trit_gpt_free(m);
}

static void metrics_seeds(void) {
    static const char m[] =
        "{\"step\":1,\"loss\":4.17,\"skipped\":0,\"lr\":1e-05,\"grad_norm\":1.5,\"ms\":12.5,\"tokens_per_s\":100.00}\n"
        "{\"step\":2,\"loss\":3.9,\"val_loss\":3.95,\"accuracy\":0.5,\"loss_scale\":65536,\"skipped\":1,\"lr\":2e-05,"
        "\"grad_norm\":-1,\"ms\":11.0,\"tokens_per_s\":99.5}\n\n  \n";
    write_seed("fuzz_metrics", "run.jsonl", m, sizeof m - 1);
}

// Two framed records (an event file's version string, then a payload) and an empty record.
static void tfrecord_seeds(void) {
    static const char version[] = "brain.Event:2";
    static const uint8_t payload[] = {0x09, 0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0x01};
    uint8_t buf[2 * 16 + sizeof version - 1 + sizeof payload];
    trit_tfrecord_frame(buf, version, sizeof version - 1);
    trit_tfrecord_frame(buf + 16 + sizeof version - 1, payload, sizeof payload);
    write_seed("fuzz_tfrecord", "two_records", buf, sizeof buf);
    static const uint8_t none[1] = {0};
    trit_tfrecord_frame(buf, none, 0);
    write_seed("fuzz_tfrecord", "empty_record", buf, 16);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: fuzz_make_corpus DIR (fuzz/corpus)\n");
        return 2;
    }
    root = argv[1];
    if (mkdir(root, 0755) != 0 && errno != EEXIST) abort();
    safetensors_seeds();
    model_seeds();
    shard_seeds();
    tokenizer_seeds();
    gpt2_seeds();
    args_seeds();
    metrics_seeds();
    interop_seeds();
    tfrecord_seeds();
    return 0;
}
