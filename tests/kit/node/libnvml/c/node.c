/* One simulated node's GPUs as the NVML stand-in's C library sees them; see node.h. */
#include "node.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_STATE_BYTES (16 * 1024 * 1024) /* a node's state is kilobytes; refuse anything huge */

/* ---- where the node's state is ------------------------------------------------------------ */

static char driver_root[PATH_MAX], state_path[PATH_MAX + 16], lock_path[PATH_MAX + 32];
static pthread_once_t located = PTHREAD_ONCE_INIT;

/* The library sits at <driver root>/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1 as on a node
 * (or directly in a directory, which is then the root); the state file is <root>/gpus.json. */
static void locate(void) {
    Dl_info info;
    char directory[PATH_MAX];
    if (!dladdr((void *)locate, &info) || !info.dli_fname) return;
    snprintf(directory, sizeof directory, "%s", info.dli_fname);
    char *slash = strrchr(directory, '/');
    if (slash) *slash = '\0';
    else snprintf(directory, sizeof directory, ".");
    if (!realpath(directory, driver_root)) return;
    static const char *lib_dirs[] = {"/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib"};
    for (size_t i = 0; i < sizeof lib_dirs / sizeof *lib_dirs; i++) {
        size_t n = strlen(driver_root), m = strlen(lib_dirs[i]);
        if (n > m && !strcmp(driver_root + n - m, lib_dirs[i])) {
            driver_root[n - m] = '\0';
            break;
        }
    }
    snprintf(state_path, sizeof state_path, "%s/gpus.json", driver_root);
    snprintf(lock_path, sizeof lock_path, "%s.lock", state_path);
}

const char *sim_driver_root(void) {
    pthread_once(&located, locate);
    return driver_root;
}

const char *sim_state_path(void) {
    pthread_once(&located, locate);
    return state_path;
}

/* ---- the lock and the document ------------------------------------------------------------ */

static jv *load(void) {
    int fd = open(state_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NULL;
    struct stat st;
    jv *doc = NULL;
    if (fstat(fd, &st) == 0 && st.st_size > 0 && st.st_size <= MAX_STATE_BYTES) {
        char *text = malloc(st.st_size);
        ssize_t got = 0, n;
        while (text && got < st.st_size && (n = read(fd, text + got, st.st_size - got)) > 0)
            got += n;
        if (text && got == st.st_size) doc = json_parse(text, got);
        free(text);
    }
    close(fd);
    if (doc && !json_is(json_get(doc, "gpus"), J_ARR)) {
        json_free(doc);
        doc = NULL;
    }
    return doc;
}

/* Write as the next generation: a temporary file renamed over the old one, as statefile.py. */
static void save(jv *doc) {
    json_set(doc, "generation", json_int(json_key_num(doc, "generation", -1) + 1));
    char *text = json_dump(doc);
    char tmp[PATH_MAX + 64];
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", state_path, (int)getpid());
    int fd = text ? open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : -1;
    if (fd >= 0) {
        size_t length = strlen(text), done = 0;
        ssize_t n;
        while (done < length && (n = write(fd, text + done, length - done)) > 0) done += n;
        close(fd);
        if (done == length) rename(tmp, state_path);
        else unlink(tmp);
    }
    free(text);
}

int sim_open(sim_node *node, int writing) {
    pthread_once(&located, locate);
    memset(node, 0, sizeof *node);
    node->fd = -1;
    if (!state_path[0]) return SIM_DRIVER_NOT_LOADED;
    node->fd = open(lock_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (node->fd < 0) return SIM_DRIVER_NOT_LOADED;
    while (flock(node->fd, writing ? LOCK_EX : LOCK_SH) != 0 && errno == EINTR) {
    }
    node->writing = writing;
    node->doc = load();
    if (!node->doc) {
        sim_close(node);
        return SIM_DRIVER_NOT_LOADED;
    }
    return SIM_OK;
}

void sim_close(sim_node *node) {
    if (node->doc && node->writing && node->changed) save(node->doc);
    json_free(node->doc);
    node->doc = NULL;
    if (node->fd >= 0) {
        flock(node->fd, LOCK_UN);
        close(node->fd);
    }
    node->fd = -1;
}

int sim_lost(const sim_node *node) { return (int)json_key_num(node->doc, "lost", 0); }

int sim_gpu_count(const sim_node *node) { return json_len(json_get(node->doc, "gpus")); }

jv *sim_gpu(const sim_node *node, int index) { return json_at(json_get(node->doc, "gpus"), index); }

const char *sim_driver_version(const sim_node *node) {
    const char *version = json_key_str(node->doc, "driver_version");
    return version ? version : "580.159.04";
}

/* ---- MIG mode ----------------------------------------------------------------------------- */

static jv *mig(const jv *gpu) {
    jv *m = json_get(gpu, "mig");
    return json_is(m, J_OBJ) ? m : NULL;
}

int sim_mig_capable(const jv *gpu) {
    return mig(gpu) != NULL && json_len(json_get(gpu, "gi_profiles")) > 0;
}

unsigned sim_mig_current(const jv *gpu) { return (unsigned)json_key_num(mig(gpu), "current", 0); }

unsigned sim_mig_pending(const jv *gpu) {
    return (unsigned)json_key_num(mig(gpu), "pending", sim_mig_current(gpu));
}

int sim_mig_enabled(const jv *gpu) { return sim_mig_capable(gpu) && sim_mig_current(gpu) == 1; }

unsigned sim_max_mig_devices(const jv *gpu) {
    if (!sim_mig_enabled(gpu)) return 0;
    unsigned most = 0;
    jv *profiles = json_get(gpu, "gi_profiles");
    for (int i = 0; i < json_len(profiles); i++) {
        unsigned slices = (unsigned)json_key_num(json_at(profiles, i), "slice_count", 0);
        if (slices > most) most = slices;
    }
    return most;
}

static int has_processes(const jv *gpu) { return json_len(json_get(gpu, "processes")) > 0; }

static void set_mode(jv *gpu, const char *key, unsigned mode) {
    json_set(mig(gpu), key, json_int(mode));
}

int sim_set_mig_mode(jv *gpu, unsigned mode, unsigned *activation) {
    *activation = SIM_OK;
    if (!sim_mig_capable(gpu)) return SIM_NOT_SUPPORTED;
    if (mode > 1) return SIM_INVALID_ARGUMENT;
    set_mode(gpu, "pending", mode);
    if (mode == sim_mig_current(gpu)) return SIM_OK;
    if (has_processes(gpu) || json_len(sim_gpu_instances(gpu)) > 0) {
        *activation = SIM_IN_USE; /* the device could not be unbound: not idle (nvml.h) */
        return SIM_OK;
    }
    const char *activates = json_key_str(mig(gpu), "activation");
    if (activates && !strcmp(activates, "reset-required")) {
        *activation = SIM_RESET_REQUIRED;
        return SIM_OK;
    }
    set_mode(gpu, "current", mode);
    return SIM_OK;
}

int sim_reset(jv *gpu) {
    if (has_processes(gpu)) return SIM_IN_USE;
    json_set(gpu, "gpu_instances", json_arr());
    if (!mig(gpu)) return SIM_OK;
    if (json_is(json_get(mig(gpu), "survives_reset"), J_BOOL) &&
        json_get(mig(gpu), "survives_reset")->boolean) {
        set_mode(gpu, "current", sim_mig_pending(gpu));
    } else {
        set_mode(gpu, "current", 0);
        set_mode(gpu, "pending", 0);
    }
    return SIM_OK;
}

/* ---- profiles ----------------------------------------------------------------------------- */

static void read_profile(const jv *row, sim_gi_profile *out) {
    memset(out, 0, sizeof *out);
    out->enum_value = (unsigned)json_key_num(row, "enum", 0);
    out->id = (unsigned)json_key_num(row, "id", 0);
    out->slices = (unsigned)json_key_num(row, "slice_count", 0);
    out->instances = (unsigned)json_key_num(row, "instance_count", 0);
    out->sms = (unsigned)json_key_num(row, "multiprocessor_count", 0);
    out->copy_engines = (unsigned)json_key_num(row, "copy_engine_count", 0);
    out->decoders = (unsigned)json_key_num(row, "decoder_count", 0);
    out->encoders = (unsigned)json_key_num(row, "encoder_count", 0);
    out->jpegs = (unsigned)json_key_num(row, "jpeg_count", 0);
    out->ofas = (unsigned)json_key_num(row, "ofa_count", 0);
    out->memory_mb = (unsigned long long)json_key_num(row, "memory_size_mb", 0);
    out->name = json_key_str(row, "name");
    if (!out->name) out->name = "MIG ?";
    jv *placements = json_get(row, "placements");
    for (int i = 0; i < json_len(placements) && i < SIM_MAX_PLACEMENTS; i++) {
        jv *pair = json_at(placements, i);
        out->placements[i].start = (unsigned)json_num(json_at(pair, 0), 0);
        out->placements[i].size = (unsigned)json_num(json_at(pair, 1), 0);
        out->placement_count++;
    }
}

static int find_profile(const jv *gpu, const char *key, unsigned value, sim_gi_profile *out) {
    jv *profiles = json_get(gpu, "gi_profiles");
    for (int i = 0; i < json_len(profiles); i++) {
        jv *row = json_at(profiles, i);
        if ((unsigned)json_key_num(row, key, -1) == value) {
            read_profile(row, out);
            return 1;
        }
    }
    return 0;
}

int sim_profile_by_enum(const jv *gpu, unsigned enum_value, sim_gi_profile *out) {
    return find_profile(gpu, "enum", enum_value, out);
}

int sim_profile_by_id(const jv *gpu, unsigned id, sim_gi_profile *out) {
    return find_profile(gpu, "id", id, out);
}

/* NVML_COMPUTE_INSTANCE_PROFILE_* per compute-slice count, in slice order. */
static const struct {
    unsigned slices, enum_value;
} ci_enums[] = {{1, 0}, {2, 1}, {3, 2}, {4, 3}, {6, 6}, {7, 4}, {8, 5}};

/* C <= G, and C < G only when 2C <= G + 1 (go-nvlib's rule, matching the A100 -lcip tables);
 * placements are the multiples of C that fit; SMs scale with C. As models.compute_profiles. */
int sim_ci_profiles(const sim_gi_profile *gi, sim_ci_profile out[SIM_MAX_CI_PROFILES]) {
    int n = 0;
    unsigned g = gi->slices;
    for (size_t i = 0; i < sizeof ci_enums / sizeof *ci_enums; i++) {
        unsigned c = ci_enums[i].slices;
        if (c > g || (c < g && 2 * c > g + 1)) continue;
        sim_ci_profile *p = &out[n++];
        memset(p, 0, sizeof *p);
        p->enum_value = ci_enums[i].enum_value;
        p->slices = c;
        p->sms = gi->sms * c / g;
        for (unsigned start = 0; start + c <= g && p->start_count < 8; start += c)
            p->starts[p->start_count++] = start;
    }
    return n;
}

int sim_ci_profile_by_enum(const sim_gi_profile *gi, unsigned enum_value, sim_ci_profile *out) {
    sim_ci_profile all[SIM_MAX_CI_PROFILES];
    int n = sim_ci_profiles(gi, all);
    for (int i = 0; i < n; i++) {
        if (all[i].enum_value == enum_value) {
            *out = all[i];
            return 1;
        }
    }
    return 0;
}

void sim_mig_device_profile(const sim_gi_profile *gi, unsigned ci_slices, char *out, size_t n) {
    const char *name = strncmp(gi->name, "MIG ", 4) ? gi->name : gi->name + 4;
    if (ci_slices == gi->slices) snprintf(out, n, "%s", name);
    else snprintf(out, n, "%uc.%s", ci_slices, name);
}

/* Enums whose instances take the GPU's one media-extension set: 1_SLICE_REV1, 2_SLICE_REV1,
 * 1_SLICE_ALL_ME, 2_SLICE_ALL_ME (models.MEDIA_EXTENSION_ENUMS). */
static int media_extension(unsigned enum_value) {
    return enum_value == 7 || enum_value == 8 || enum_value == 15 || enum_value == 16;
}

/* ---- GPU instances ------------------------------------------------------------------------ */

jv *sim_gpu_instances(const jv *gpu) {
    jv *list = json_get(gpu, "gpu_instances");
    if (!json_is(list, J_ARR)) {
        json_set((jv *)gpu, "gpu_instances", json_arr());
        list = json_get(gpu, "gpu_instances");
    }
    return list;
}

jv *sim_gpu_instance(const jv *gpu, unsigned id) {
    jv *list = sim_gpu_instances(gpu);
    for (int i = 0; i < json_len(list); i++)
        if ((unsigned)json_key_num(json_at(list, i), "id", -1) == id) return json_at(list, i);
    return NULL;
}

jv *sim_compute_instance(const jv *gi, unsigned id) {
    jv *list = json_get(gi, "compute_instances");
    for (int i = 0; i < json_len(list); i++)
        if ((unsigned)json_key_num(json_at(list, i), "id", -1) == id) return json_at(list, i);
    return NULL;
}

static unsigned long mask_of(unsigned start, unsigned size) {
    return ((1UL << size) - 1) << start;
}

static unsigned long gi_mask(const jv *gi) {
    jv *at = json_get(gi, "placement");
    return mask_of((unsigned)json_key_num(at, "start", 0), (unsigned)json_key_num(at, "size", 0));
}

static unsigned long occupied(const jv *gpu) {
    unsigned long mask = 0;
    jv *list = sim_gpu_instances(gpu);
    for (int i = 0; i < json_len(list); i++) mask |= gi_mask(json_at(list, i));
    return mask;
}

static unsigned instances_of(const jv *gpu, unsigned profile_id) {
    unsigned n = 0;
    jv *list = sim_gpu_instances(gpu);
    for (int i = 0; i < json_len(list); i++)
        n += (unsigned)json_key_num(json_at(list, i), "profile_id", -1) == profile_id;
    return n;
}

static int media_extension_taken(const jv *gpu, const sim_gi_profile *profile) {
    if (!media_extension(profile->enum_value)) return 0;
    jv *list = sim_gpu_instances(gpu);
    for (int i = 0; i < json_len(list); i++) {
        sim_gi_profile other;
        unsigned id = (unsigned)json_key_num(json_at(list, i), "profile_id", -1);
        if (sim_profile_by_id(gpu, id, &other) && media_extension(other.enum_value)) return 1;
    }
    return 0;
}

static unsigned room_for(const jv *gpu, const sim_gi_profile *profile) {
    unsigned existing = instances_of(gpu, profile->id);
    return existing >= profile->instances ? 0 : profile->instances - existing;
}

unsigned sim_remaining_capacity(const jv *gpu, const sim_gi_profile *profile) {
    if (media_extension_taken(gpu, profile)) return 0;
    unsigned long taken = occupied(gpu);
    unsigned fitting = 0;
    for (int i = 0; i < profile->placement_count; i++) {
        unsigned long m = mask_of(profile->placements[i].start, profile->placements[i].size);
        if (!(m & taken)) {
            taken |= m;
            fitting++;
        }
    }
    unsigned room = room_for(gpu, profile);
    return fitting < room ? fitting : room;
}

static unsigned memory_slices(const jv *gpu) {
    unsigned most = 0;
    jv *profiles = json_get(gpu, "gi_profiles");
    for (int i = 0; i < json_len(profiles); i++) {
        sim_gi_profile p;
        read_profile(json_at(profiles, i), &p);
        for (int j = 0; j < p.placement_count; j++)
            if (p.placements[j].start + p.placements[j].size > most)
                most = p.placements[j].start + p.placements[j].size;
    }
    return most;
}

/* Without a requested placement the driver takes the free one that blocks the fewest
 * still-possible placements of all profiles, the lowest start on a tie (instances.py). */
static int default_placement(const jv *gpu, const sim_gi_profile *profile, sim_slot *out) {
    unsigned long taken = occupied(gpu);
    int found = 0;
    unsigned best_blocked = 0;
    jv *profiles = json_get(gpu, "gi_profiles");
    for (int i = 0; i < profile->placement_count; i++) {
        sim_slot p = profile->placements[i];
        unsigned long m = mask_of(p.start, p.size);
        if (m & taken) continue;
        unsigned blocked = 0;
        for (int j = 0; j < json_len(profiles); j++) {
            sim_gi_profile other;
            read_profile(json_at(profiles, j), &other);
            for (int k = 0; k < other.placement_count; k++) {
                unsigned long o = mask_of(other.placements[k].start, other.placements[k].size);
                if (!(o & taken) && (o & m)) blocked++;
            }
        }
        if (!found || blocked < best_blocked || (blocked == best_blocked && p.start < out->start)) {
            *out = p;
            best_blocked = blocked;
            found = 1;
        }
    }
    return found;
}

/* GPU instance IDs are the driver's "swizzle IDs", a binary tree over the memory slices
 * (0 the whole GPU, 1-2 the halves, 3-6 the quarters, 7-14 the eighths); instances.py. */
static unsigned new_gpu_instance_id(const jv *gpu, sim_slot at) {
    unsigned slices = memory_slices(gpu);
    if (slices && !(slices & (slices - 1)) && at.size && slices % at.size == 0) {
        unsigned swizzle = slices / at.size - 1 + at.start / at.size;
        if (!sim_gpu_instance(gpu, swizzle)) return swizzle;
    }
    for (unsigned id = 1;; id++)
        if (!sim_gpu_instance(gpu, id)) return id;
}

static void insert_sorted(jv *list, jv *item) {
    unsigned id = (unsigned)json_key_num(item, "id", 0);
    json_push(list, item);
    int i = list->count - 1;
    while (i > 0 && (unsigned)json_key_num(list->items[i - 1], "id", 0) > id) {
        list->items[i] = list->items[i - 1];
        i--;
    }
    list->items[i] = item;
}

int sim_create_gpu_instance(jv *gpu, const sim_gi_profile *profile, const sim_slot *at,
                            unsigned *id) {
    sim_slot chosen = {0, 0};
    if (at) {
        int offered = 0;
        for (int i = 0; i < profile->placement_count; i++)
            offered |= profile->placements[i].start == at->start &&
                       profile->placements[i].size == at->size;
        if (!offered) return SIM_INVALID_ARGUMENT;
    }
    if (room_for(gpu, profile) == 0 || media_extension_taken(gpu, profile))
        return SIM_INSUFFICIENT_RESOURCES;
    if (at) chosen = *at;
    else if (!default_placement(gpu, profile, &chosen)) return SIM_INSUFFICIENT_RESOURCES;
    if (mask_of(chosen.start, chosen.size) & occupied(gpu)) return SIM_INSUFFICIENT_RESOURCES;
    *id = new_gpu_instance_id(gpu, chosen);
    jv *gi = json_obj(), *placement = json_obj();
    json_set(gi, "id", json_int(*id));
    json_set(gi, "profile_id", json_int(profile->id));
    json_set(gi, "profile", json_str(strncmp(profile->name, "MIG ", 4) ? profile->name
                                                                          : profile->name + 4));
    json_set(placement, "start", json_int(chosen.start));
    json_set(placement, "size", json_int(chosen.size));
    json_set(gi, "placement", placement);
    json_set(gi, "compute_instances", json_arr());
    insert_sorted(sim_gpu_instances(gpu), gi);
    return SIM_OK;
}

static int index_of(const jv *list, const jv *item) {
    for (int i = 0; i < json_len(list); i++)
        if (json_at(list, i) == item) return i;
    return -1;
}

int sim_destroy_gpu_instance(jv *gpu, unsigned id) {
    jv *gi = sim_gpu_instance(gpu, id);
    if (!gi) return SIM_INVALID_ARGUMENT;
    if (sim_processes(gpu, id, SIM_NOT_AVAILABLE, NULL, 0) > 0) return SIM_IN_USE;
    if (json_len(json_get(gi, "compute_instances")) > 0) return SIM_IN_USE;
    json_remove(sim_gpu_instances(gpu), index_of(sim_gpu_instances(gpu), gi));
    return SIM_OK;
}

/* ---- compute instances -------------------------------------------------------------------- */

static unsigned long ci_occupied(const jv *gi) {
    unsigned long mask = 0;
    jv *list = json_get(gi, "compute_instances");
    for (int i = 0; i < json_len(list); i++) {
        jv *ci = json_at(list, i);
        mask |= mask_of((unsigned)json_key_num(ci, "start", 0),
                        (unsigned)json_key_num(ci, "slices", 0));
    }
    return mask;
}

unsigned sim_ci_remaining_capacity(const jv *gi, const sim_ci_profile *profile) {
    unsigned long taken = ci_occupied(gi);
    unsigned fitting = 0;
    for (int i = 0; i < profile->start_count; i++) {
        unsigned long m = mask_of(profile->starts[i], profile->slices);
        if (!(m & taken)) {
            taken |= m;
            fitting++;
        }
    }
    return fitting;
}

/* A MIG device UUID, new for every compute instance created (a re-created instance gets a new
 * one): a 128-bit hash of the GPU's UUID, the instance IDs and the GPU's creation counter. */
static void mig_uuid(const char *seed, char *out, size_t n) {
    uint64_t a = 0xcbf29ce484222325ULL, b = 0x84222325cbf29ce4ULL;
    for (const unsigned char *p = (const unsigned char *)seed; *p; p++) {
        a = (a ^ *p) * 0x100000001b3ULL;
        b = (b ^ *p) * 0x100000001b3ULL + 0x9e3779b97f4a7c15ULL;
    }
    for (int i = 0; i < 2; i++) { /* splitmix64's finaliser, to spread the bits */
        uint64_t *x = i ? &b : &a;
        *x ^= *x >> 30;
        *x *= 0xbf58476d1ce4e5b9ULL;
        *x ^= *x >> 27;
        *x *= 0x94d049bb133111ebULL;
        *x ^= *x >> 31;
    }
    a = (a & ~0xF000ULL) | 0x4000ULL;                      /* version 4 */
    b = (b & 0x3FFFFFFFFFFFFFFFULL) | 0x8000000000000000ULL; /* RFC 4122 variant */
    snprintf(out, n, "MIG-%08x-%04x-%04x-%04x-%012llx", (unsigned)(a >> 32),
             (unsigned)(a >> 16 & 0xFFFF), (unsigned)(a & 0xFFFF), (unsigned)(b >> 48),
             (unsigned long long)(b & 0xFFFFFFFFFFFFULL));
}

int sim_create_compute_instance(jv *gpu, jv *gi, const sim_ci_profile *profile, int start,
                                unsigned *id) {
    if (start >= 0) {
        int offered = 0;
        for (int i = 0; i < profile->start_count; i++) offered |= profile->starts[i] == (unsigned)start;
        if (!offered) return SIM_INVALID_ARGUMENT;
    }
    unsigned long taken = ci_occupied(gi);
    int chosen = -1;
    for (int i = 0; i < profile->start_count && chosen < 0; i++) {
        int free_here = !(mask_of(profile->starts[i], profile->slices) & taken);
        if (free_here && (start < 0 || (unsigned)start == profile->starts[i]))
            chosen = (int)profile->starts[i];
    }
    if (chosen < 0) return SIM_INSUFFICIENT_RESOURCES;
    unsigned ci_id = 0;
    while (sim_compute_instance(gi, ci_id)) ci_id++;
    long long counter = json_key_num(gpu, "mig_uuid_counter", 0) + 1;
    json_set(gpu, "mig_uuid_counter", json_int(counter));
    char seed[256], uuid[64];
    const char *gpu_uuid = json_key_str(gpu, "uuid");
    snprintf(seed, sizeof seed, "%s/%u/%u/%lld", gpu_uuid ? gpu_uuid : "?",
             (unsigned)json_key_num(gi, "id", 0), ci_id, counter);
    mig_uuid(seed, uuid, sizeof uuid);
    jv *ci = json_obj();
    json_set(ci, "id", json_int(ci_id));
    json_set(ci, "profile_id", json_int(profile->enum_value));
    json_set(ci, "slices", json_int(profile->slices));
    json_set(ci, "start", json_int(chosen));
    json_set(ci, "uuid", json_str(uuid));
    jv *list = json_get(gi, "compute_instances");
    if (!json_is(list, J_ARR)) {
        json_set(gi, "compute_instances", json_arr());
        list = json_get(gi, "compute_instances");
    }
    insert_sorted(list, ci);
    *id = ci_id;
    return SIM_OK;
}

int sim_destroy_compute_instance(jv *gpu, jv *gi, unsigned id) {
    jv *ci = sim_compute_instance(gi, id);
    if (!ci) return SIM_INVALID_ARGUMENT;
    if (sim_processes(gpu, (unsigned)json_key_num(gi, "id", 0), id, NULL, 0) > 0) return SIM_IN_USE;
    jv *list = json_get(gi, "compute_instances");
    json_remove(list, index_of(list, ci));
    return SIM_OK;
}

/* ---- processes ---------------------------------------------------------------------------- */

int sim_processes(const jv *gpu, unsigned gi, unsigned ci, jv **out, int room) {
    int n = 0;
    jv *list = json_get(gpu, "processes");
    for (int i = 0; i < json_len(list); i++) {
        jv *p = json_at(list, i);
        if (gi != SIM_NOT_AVAILABLE) {
            if ((unsigned)json_key_num(p, "gpu_instance_id", SIM_NOT_AVAILABLE) != gi) continue;
            if (ci != SIM_NOT_AVAILABLE &&
                (unsigned)json_key_num(p, "compute_instance_id", SIM_NOT_AVAILABLE) != ci)
                continue;
        }
        if (out && n < room) out[n] = p;
        n++;
    }
    return n;
}
