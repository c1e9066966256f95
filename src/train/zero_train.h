// The trainer's --dist zero1|zero2|zero3 state, shared by zero_train.c (the step) and zero_ckpt.c
// (sharded checkpoints).
#ifndef TRIT_ZERO_TRAIN_H
#define TRIT_ZERO_TRAIN_H

#include "train/trainer.h"

typedef struct trainer_zero {
    int stage;               // 1, 2 or 3
    int shards, shard;       // ranks a shard group holds (the job's unless --shard-group), this rank's place
    int64_t count;           // elements of the gradient block
    int64_t lo, hi;          // this rank's shard of it
    int n;                   // pieces of trained parameters in the shard
    trit_tensor **views;     // (n) 1-D views of them, each with its gradient's piece
    trit_tensor **full;      // (n) the parameter each is a piece of
    int64_t *at;             // (n) its first element in that parameter
    int64_t trained;         // elements of the trained parameters (all ranks)
    int64_t weight_bytes;    // their bytes as stored
    // stage 3: the parameter block (the trained dtype's, frozen values of it included) and its shards
    int64_t *bounds;         // (shards + 1) the parameter block's shards, elements; then the gradient block's
    int64_t plo, phi;        // this rank's shard of the parameter block
    int64_t pcount;          // its elements, padding included
    trit_dtype dt;           // its dtype (the trained parameters')
    size_t elsize;           // bytes of its element
    int64_t frozen;          // frozen values in it
    int64_t sharded_bytes;   // bytes of the graph's parameters in it (as the memory report counts them)
    int64_t whole_bytes;     // the memory report's other parameter bytes (other dtypes: kept whole)
    struct trit_zero *z;     // the sharded exchange (src/dist)
    struct trit_zero3 *z3;   // stage 3: the parameters' gathers (src/dist)
    bool holding;            // stage 3: rank 0 holds the whole weights (to evaluate or save)
    int64_t prev_ckpt;       // step of this run's last sharded checkpoint, -1 before one
} trainer_zero;

#endif
