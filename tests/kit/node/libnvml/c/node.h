/* One simulated node's GPUs as the NVML stand-in's C library sees them (test code only).
 *
 * Owns: finding the node's state file from the library's own path (no environment variable:
 * NVIDIA's binaries run unmodified against a driver root), holding the same flock
 * tests/kit/node/libnvml/statefile.py holds while a call reads or changes the GPUs, loading the
 * JSON document that module writes and saving it back as the next generation, and the GPU and
 * MIG rules: MIG mode with its pending state, GPU-instance profiles and placements as the
 * file lists them, compute-instance profiles derived from them, create and destroy with
 * overlap, cap and in-use checks, instance IDs and MIG UUIDs. The rules are those of
 * tests/kit/node/libnvml/{device,instances,models}.py, documented in docs/simulated-nvml.md.
 * Must not: know NVML's C structs or handles (nvml.c).
 */
#ifndef SIM_NODE_H
#define SIM_NODE_H

#include "json.h"

#define SIM_OK 0 /* the NVML return codes node.c answers with, as in nvml.h */
#define SIM_INVALID_ARGUMENT 2
#define SIM_NOT_SUPPORTED 3
#define SIM_NO_PERMISSION 4
#define SIM_NOT_FOUND 6
#define SIM_INSUFFICIENT_SIZE 7
#define SIM_DRIVER_NOT_LOADED 9
#define SIM_IN_USE 19
#define SIM_INSUFFICIENT_RESOURCES 23
#define SIM_RESET_REQUIRED 16
#define SIM_UNKNOWN 999

#define SIM_MAX_PLACEMENTS 16
#define SIM_MAX_CI_PROFILES 8
#define SIM_NOT_AVAILABLE 0xFFFFFFFFu

typedef struct {
    unsigned start, size;
} sim_slot;

typedef struct {
    unsigned enum_value, id, slices, instances, sms, copy_engines, decoders, encoders, jpegs, ofas;
    unsigned long long memory_mb;
    const char *name; /* "MIG 1g.18gb", as the file keeps it */
    sim_slot placements[SIM_MAX_PLACEMENTS];
    int placement_count;
} sim_gi_profile;

typedef struct {
    unsigned enum_value, slices, sms;
    unsigned starts[8];
    int start_count;
} sim_ci_profile;

typedef struct {
    jv *doc;     /* the whole document */
    int fd;      /* the lock */
    int writing; /* holds the lock exclusively and saves on close if changed */
    int changed;
} sim_node;

/* Paths beside the library: the driver root, its state file, and the strict-mode files. */
const char *sim_driver_root(void);
const char *sim_state_path(void);

int sim_open(sim_node *node, int writing); /* SIM_OK, or SIM_DRIVER_NOT_LOADED without state */
void sim_close(sim_node *node);            /* saves a changed document, unlocks, frees */

/* The code every call answers after the node lost its driver ("lost" in the file), else 0. */
int sim_lost(const sim_node *node);

int sim_gpu_count(const sim_node *node);
jv *sim_gpu(const sim_node *node, int index);
const char *sim_driver_version(const sim_node *node);

int sim_mig_capable(const jv *gpu);
int sim_mig_enabled(const jv *gpu);
unsigned sim_mig_current(const jv *gpu);
unsigned sim_mig_pending(const jv *gpu);
unsigned sim_max_mig_devices(const jv *gpu);
int sim_set_mig_mode(jv *gpu, unsigned mode, unsigned *activation);
int sim_reset(jv *gpu); /* what `nvidia-smi -r` does; the C library itself never resets */

int sim_profile_by_enum(const jv *gpu, unsigned enum_value, sim_gi_profile *out);
int sim_profile_by_id(const jv *gpu, unsigned id, sim_gi_profile *out);
int sim_ci_profiles(const sim_gi_profile *gi, sim_ci_profile out[SIM_MAX_CI_PROFILES]);
int sim_ci_profile_by_enum(const sim_gi_profile *gi, unsigned enum_value, sim_ci_profile *out);
void sim_mig_device_profile(const sim_gi_profile *gi, unsigned ci_slices, char *out, size_t n);

jv *sim_gpu_instances(const jv *gpu); /* the array, sorted by ID */
jv *sim_gpu_instance(const jv *gpu, unsigned id);
jv *sim_compute_instance(const jv *gi, unsigned id);
unsigned sim_remaining_capacity(const jv *gpu, const sim_gi_profile *profile);
unsigned sim_ci_remaining_capacity(const jv *gi, const sim_ci_profile *profile);
int sim_create_gpu_instance(jv *gpu, const sim_gi_profile *profile, const sim_slot *at,
                            unsigned *id);
int sim_destroy_gpu_instance(jv *gpu, unsigned id);
int sim_create_compute_instance(jv *gpu, jv *gi, const sim_ci_profile *profile, int start,
                                unsigned *id);
int sim_destroy_compute_instance(jv *gpu, jv *gi, unsigned id);

/* Processes of a GPU, or of one GPU instance (gi != SIM_NOT_AVAILABLE) and compute instance. */
int sim_processes(const jv *gpu, unsigned gi, unsigned ci, jv **out, int room);

#endif
