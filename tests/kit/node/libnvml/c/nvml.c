/* libnvidia-ml.so.1 for a simulated node: NVML's C entry points over the node's state file
 * (test code only).
 *
 * Owns: the NVML functions the node agent (kubectl_gpu/nvml.py through pynvml),
 * scripts/nvml_readings.py, NVIDIA's device plugin and the node's other processes call (Xid
 * events through event sets among them), with the return codes the real
 * driver gives (tests/data/nvml) or nvml.h documents; opaque handles (stable per GPU, GPU
 * instance, compute instance and MIG device, so they compare as the real library's do, and
 * invalid once what they name is gone); init reference counting; and the call log of strict
 * mode. Every NVML function not defined here is a generated stub (stubs.c, made at build time
 * from nvml.h) answering NVML_ERROR_NOT_SUPPORTED, or failing loudly in strict mode.
 * Must not: keep GPU state of its own between calls (every call reads the node's state file
 * under its lock, so every process on the node sees one truth) or decide GPU rules (node.c).
 *
 * Types, constants and struct layouts are NVIDIA's nvml.h (the copy in the Go module
 * github.com/NVIDIA/go-nvml, pinned in go.mod beside this file), compiled against at build time.
 */
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#define NVML_NO_UNVERSIONED_FUNC_DEFS /* define the old names too, as the real library does */
#include "nvml.h"

#include "node.h"
#include "trace.h"

_Static_assert(SIM_INVALID_ARGUMENT == NVML_ERROR_INVALID_ARGUMENT, "codes");
_Static_assert(SIM_NOT_SUPPORTED == NVML_ERROR_NOT_SUPPORTED, "codes");
_Static_assert(SIM_NOT_FOUND == NVML_ERROR_NOT_FOUND, "codes");
_Static_assert(SIM_INSUFFICIENT_SIZE == NVML_ERROR_INSUFFICIENT_SIZE, "codes");
_Static_assert(SIM_DRIVER_NOT_LOADED == NVML_ERROR_DRIVER_NOT_LOADED, "codes");
_Static_assert(SIM_IN_USE == NVML_ERROR_IN_USE, "codes");
_Static_assert(SIM_INSUFFICIENT_RESOURCES == NVML_ERROR_INSUFFICIENT_RESOURCES, "codes");
_Static_assert(SIM_RESET_REQUIRED == NVML_ERROR_RESET_REQUIRED, "codes");

#define NVML_VERSION_PREFIX "13." /* NVML 13 reports "13.<driver version>" */
#define CUDA_DRIVER_VERSION 13000 /* what driver 580.159.04 reported (tests/data/nvml) */
#define MIB (1024ULL * 1024ULL)
#define PROFILE_ENUMS_THE_DRIVER_KNOWS 17 /* enum 17 (3_SLICE_GFX) is newer than driver 580 */

/* ---- handles ------------------------------------------------------------------------------ */

enum kind { GPU = 1, MIG = 2, GI = 4, CI = 8 };

/* What a handle names. GPUs by index; GPU instances by ID, profile and placement start;
 * compute instances and MIG devices by their MIG UUID (new for each instance created). */
typedef struct {
    int kind, gpu;
    unsigned gi, profile, start, ci;
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
} key;

struct nvmlDevice_st {
    key k;
};
struct nvmlGpuInstance_st {
    key k;
};
struct nvmlComputeInstance_st {
    key k;
};

#define MAX_HANDLES 8192
static key *handles[MAX_HANDLES];
static int handle_count;
static pthread_mutex_t handle_lock = PTHREAD_MUTEX_INITIALIZER;

static int same(const key *a, const key *b) {
    if (a->kind != b->kind || a->gpu != b->gpu) return 0;
    if (a->kind == GPU) return 1;
    if (a->kind == GI) return a->gi == b->gi && a->profile == b->profile && a->start == b->start;
    return !strcmp(a->uuid, b->uuid);
}

/* The one handle for `k`, made on first use and kept for the process's life. */
static void *handle_for(const key *k) {
    pthread_mutex_lock(&handle_lock);
    void *found = NULL;
    for (int i = 0; i < handle_count && !found; i++)
        if (same(handles[i], k)) found = handles[i];
    if (!found && handle_count < MAX_HANDLES && (found = malloc(sizeof(key)))) {
        memcpy(found, k, sizeof(key));
        handles[handle_count++] = found;
    }
    pthread_mutex_unlock(&handle_lock);
    return found;
}

static const key *known(const void *handle) {
    const key *k = NULL;
    pthread_mutex_lock(&handle_lock);
    for (int i = 0; i < handle_count && !k; i++)
        if (handles[i] == handle) k = handles[i];
    pthread_mutex_unlock(&handle_lock);
    return k;
}

/* What a live handle names in the node's current state. */
typedef struct {
    int kind, index;
    jv *gpu, *gi, *ci;
} target;

static jv *ci_by_uuid(jv *gpu, const char *uuid, jv **gi_out) {
    jv *gis = sim_gpu_instances(gpu);
    for (int i = 0; i < json_len(gis); i++) {
        jv *cis = json_get(json_at(gis, i), "compute_instances");
        for (int j = 0; j < json_len(cis); j++) {
            const char *u = json_key_str(json_at(cis, j), "uuid");
            if (u && !strcmp(u, uuid)) {
                *gi_out = json_at(gis, i);
                return json_at(cis, j);
            }
        }
    }
    return NULL;
}

static int resolve(sim_node *node, const void *handle, int kinds, target *t) {
    const key *k = handle ? known(handle) : NULL;
    memset(t, 0, sizeof *t);
    if (!k || !(k->kind & kinds) || !(t->gpu = sim_gpu(node, k->gpu))) return 0;
    t->kind = k->kind;
    t->index = k->gpu;
    if (k->kind == GPU) return 1;
    if (k->kind == GI) {
        t->gi = sim_gpu_instance(t->gpu, k->gi);
        jv *at = json_get(t->gi, "placement");
        return t->gi && (unsigned)json_key_num(t->gi, "profile_id", -1) == k->profile &&
               (unsigned)json_key_num(at, "start", -1) == k->start;
    }
    return (t->ci = ci_by_uuid(t->gpu, k->uuid, &t->gi)) != NULL;
}

static void *gpu_handle(int index) {
    key k = {.kind = GPU, .gpu = index};
    return handle_for(&k);
}

static void *gi_handle(int index, const jv *gi) {
    key k = {.kind = GI, .gpu = index};
    k.gi = (unsigned)json_key_num(gi, "id", 0);
    k.profile = (unsigned)json_key_num(gi, "profile_id", 0);
    k.start = (unsigned)json_key_num(json_get(gi, "placement"), "start", 0);
    return handle_for(&k);
}

static void *ci_handle(int kind, int index, const jv *gi, const jv *ci) {
    key k = {.kind = kind, .gpu = index};
    k.gi = (unsigned)json_key_num(gi, "id", 0);
    k.ci = (unsigned)json_key_num(ci, "id", 0);
    const char *uuid = json_key_str(ci, "uuid");
    snprintf(k.uuid, sizeof k.uuid, "%s", uuid ? uuid : "");
    return handle_for(&k);
}

/* ---- calls -------------------------------------------------------------------------------- */

static int init_count;
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;

static int initialized(void) {
    pthread_mutex_lock(&init_lock);
    int yes = init_count > 0;
    pthread_mutex_unlock(&init_lock);
    return yes;
}

static nvmlReturn_t end(sim_node *node, int result);

/* Start a call: initialised, the node's state loaded under its lock (exclusive when the call
 * may change it), and the handle argument resolved; a failure ends the call. */
static nvmlReturn_t begin(sim_node *node, int writing, const void *handle, int kinds, target *t) {
    if (!initialized()) return NVML_ERROR_UNINITIALIZED;
    int opened = sim_open(node, writing);
    if (opened != SIM_OK) return (nvmlReturn_t)opened;
    int lost = sim_lost(node); /* e.g. NVML_ERROR_UNKNOWN after `systemctl daemon-reload` */
    if (lost) return end(node, lost);
    if (kinds && !resolve(node, handle, kinds, t)) {
        sim_close(node);
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    return NVML_SUCCESS;
}

static nvmlReturn_t end(sim_node *node, int result) {
    sim_close(node);
    return (nvmlReturn_t)result;
}

#define ENTER(name) sim_trace(name)

static nvmlReturn_t put_text(char *buffer, unsigned size, const char *text) {
    if (!buffer) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(text) + 1 > size) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(buffer, text, strlen(text) + 1);
    return NVML_SUCCESS;
}

/* ---- init and the system ------------------------------------------------------------------ */

static nvmlReturn_t init(void) {
    sim_node node;
    int opened = sim_open(&node, 0); /* a node without a state file has no driver */
    if (opened != SIM_OK) return (nvmlReturn_t)opened;
    int lost = sim_lost(&node);
    sim_close(&node);
    if (lost) return (nvmlReturn_t)lost;
    pthread_mutex_lock(&init_lock);
    init_count++;
    pthread_mutex_unlock(&init_lock);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit_v2(void) { return ENTER("nvmlInit_v2"), init(); }
nvmlReturn_t nvmlInit(void) { return ENTER("nvmlInit"), init(); }
nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    return ENTER("nvmlInitWithFlags"), init();
}

nvmlReturn_t nvmlShutdown(void) {
    ENTER("nvmlShutdown");
    pthread_mutex_lock(&init_lock);
    nvmlReturn_t result = init_count > 0 ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
    if (init_count > 0) init_count--;
    pthread_mutex_unlock(&init_lock);
    return result;
}

const char *nvmlErrorString(nvmlReturn_t result) {
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED: return "GPU requires restart";
    case NVML_ERROR_IN_USE: return "In use by another client";
    case NVML_ERROR_NO_DATA: return "No data";
    case NVML_ERROR_INSUFFICIENT_RESOURCES: return "Insufficient Resources";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
    case NVML_ERROR_INVALID_STATE: return "Invalid state";
    default: return "Unknown Error";
    }
}

static nvmlReturn_t system_text(int nvml, char *buffer, unsigned length) {
    sim_node node;
    target t;
    nvmlReturn_t r = begin(&node, 0, NULL, 0, &t);
    if (r) return r;
    char text[96];
    snprintf(text, sizeof text, "%s%s", nvml ? NVML_VERSION_PREFIX : "", sim_driver_version(&node));
    return end(&node, put_text(buffer, length, text));
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    return ENTER("nvmlSystemGetDriverVersion"), system_text(0, version, length);
}

nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length) {
    return ENTER("nvmlSystemGetNVMLVersion"), system_text(1, version, length);
}

static nvmlReturn_t cuda_version(int *version) {
    sim_node node;
    target t;
    nvmlReturn_t r = begin(&node, 0, NULL, 0, &t);
    if (r) return r;
    if (!version) return end(&node, NVML_ERROR_INVALID_ARGUMENT);
    *version = CUDA_DRIVER_VERSION;
    return end(&node, NVML_SUCCESS);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v) {
    return ENTER("nvmlSystemGetCudaDriverVersion"), cuda_version(v);
}
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) {
    return ENTER("nvmlSystemGetCudaDriverVersion_v2"), cuda_version(v);
}

/* ---- device handles ----------------------------------------------------------------------- */

static nvmlReturn_t count(unsigned *n) {
    sim_node node;
    target t;
    nvmlReturn_t r = begin(&node, 0, NULL, 0, &t);
    if (r) return r;
    if (!n) return end(&node, NVML_ERROR_INVALID_ARGUMENT);
    *n = (unsigned)sim_gpu_count(&node);
    return end(&node, NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n) { return ENTER("nvmlDeviceGetCount_v2"), count(n); }
nvmlReturn_t nvmlDeviceGetCount(unsigned int *n) { return ENTER("nvmlDeviceGetCount"), count(n); }

static nvmlReturn_t by_index(unsigned index, nvmlDevice_t *device) {
    sim_node node;
    target t;
    nvmlReturn_t r = begin(&node, 0, NULL, 0, &t);
    if (r) return r;
    if (!device || index >= (unsigned)sim_gpu_count(&node)) return end(&node, NVML_ERROR_INVALID_ARGUMENT);
    device->handle = gpu_handle((int)index);
    return end(&node, NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    return ENTER("nvmlDeviceGetHandleByIndex_v2"), by_index(index, device);
}
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device) {
    return ENTER("nvmlDeviceGetHandleByIndex"), by_index(index, device);
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device) {
    ENTER("nvmlDeviceGetHandleByUUID");
    sim_node node;
    target t;
    nvmlReturn_t r = begin(&node, 0, NULL, 0, &t);
    if (r) return r;
    if (!uuid || !device) return end(&node, NVML_ERROR_INVALID_ARGUMENT);
    for (int i = 0; i < sim_gpu_count(&node); i++) {
        jv *gpu = sim_gpu(&node, i), *gi = NULL, *ci;
        const char *own = json_key_str(gpu, "uuid");
        if (own && !strcmp(own, uuid)) {
            device->handle = gpu_handle(i);
            return end(&node, NVML_SUCCESS);
        }
        if ((ci = ci_by_uuid(gpu, uuid, &gi))) {
            device->handle = ci_handle(MIG, i, gi, ci);
            return end(&node, NVML_SUCCESS);
        }
    }
    return end(&node, NVML_ERROR_NOT_FOUND);
}

/* "0000:18:00.0" and "00000000:18:00.0" name the same device, in either case. */
static void normal_bus_id(const char *in, char *out, size_t n) {
    char lower[64];
    size_t i = 0;
    for (; in[i] && i < sizeof lower - 1; i++) lower[i] = (char)tolower((unsigned char)in[i]);
    lower[i] = '\0';
    char *colon = strchr(lower, ':');
    if (!colon) {
        snprintf(out, n, "%s", lower);
        return;
    }
    *colon = '\0';
    snprintf(out, n, "%08lx:%s", strtoul(lower, NULL, 16), colon + 1);
}

static nvmlReturn_t by_bus_id(const char *bus_id, nvmlDevice_t *device) {
    sim_node node;
    target t;
    nvmlReturn_t r = begin(&node, 0, NULL, 0, &t);
    if (r) return r;
    if (!bus_id || !device) return end(&node, NVML_ERROR_INVALID_ARGUMENT);
    char wanted[64], own[64];
    normal_bus_id(bus_id, wanted, sizeof wanted);
    for (int i = 0; i < sim_gpu_count(&node); i++) {
        const char *id = json_key_str(json_get(sim_gpu(&node, i), "pci"), "bus_id");
        if (!id) continue;
        normal_bus_id(id, own, sizeof own);
        if (!strcmp(own, wanted)) {
            device->handle = gpu_handle(i);
            return end(&node, NVML_SUCCESS);
        }
    }
    return end(&node, NVML_ERROR_NOT_FOUND);
}

nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *bus_id, nvmlDevice_t *device) {
    return ENTER("nvmlDeviceGetHandleByPciBusId_v2"), by_bus_id(bus_id, device);
}
nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *bus_id, nvmlDevice_t *device) {
    return ENTER("nvmlDeviceGetHandleByPciBusId"), by_bus_id(bus_id, device);
}

/* ---- what a device reports ---------------------------------------------------------------- */

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    ENTER("nvmlDeviceGetUUID");
    sim_node node;
    target t;
    nvmlReturn_t r = begin(&node, 0, device.handle, GPU | MIG, &t);
    if (r) return r;
    const char *text = json_key_str(t.ci ? t.ci : t.gpu, "uuid");
    return end(&node, put_text(uuid, length, text ? text : ""));
}

static sim_gi_profile gi_profile_of(const target *t) {
    sim_gi_profile profile;
    if (!sim_profile_by_id(t->gpu, (unsigned)json_key_num(t->gi, "profile_id", -1), &profile))
        memset(&profile, 0, sizeof profile), profile.name = "MIG ?";
    return profile;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    ENTER("nvmlDeviceGetName");
    sim_node node;
    target t;
    nvmlReturn_t r = begin(&node, 0, device.handle, GPU | MIG, &t);
    if (r) return r;
    const char *gpu_name = json_key_str(t.gpu, "name");
    char text[NVML_DEVICE_NAME_V2_BUFFER_SIZE + 64], profile_name[64];
    if (t.kind == MIG) { /* "NVIDIA H100 80GB HBM3 MIG 1g.10gb" */
        sim_gi_profile gi = gi_profile_of(&t);
        sim_mig_device_profile(&gi, (unsigned)json_key_num(t.ci, "slices", 0), profile_name,
                               sizeof profile_name);
        snprintf(text, sizeof text, "%s MIG %s", gpu_name ? gpu_name : "", profile_name);
    } else {
        snprintf(text, sizeof text, "%s", gpu_name ? gpu_name : "");
    }
    return end(&node, put_text(name, length, text));
}

/* A whole GPU's number; NOT_SUPPORTED on a MIG device handle. */
static nvmlReturn_t gpu_number(nvmlDevice_t device, unsigned *out, const char *field) {
    sim_node node;
    target t;
    nvmlReturn_t r = begin(&node, 0, device.handle, GPU | MIG, &t);
    if (r) return r;
    if (t.kind == MIG) return end(&node, NVML_ERROR_NOT_SUPPORTED);
    if (!out) return end(&node, NVML_ERROR_INVALID_ARGUMENT);
    *out = (unsigned)json_key_num(t.gpu, field, t.index);
    return end(&node, NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index) {
    return ENTER("nvmlDeviceGetIndex"), gpu_number(device, index, "index");
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minor) {
    return ENTER("nvmlDeviceGetMinorNumber"), gpu_number(device, minor, "minor_number");
}

/* The path between two GPUs of the node. A simulated node has no PCI tree: GPUs in the same
 * half of the node (by index) hang under one CPU (NVML_TOPOLOGY_NODE) and the halves meet
 * across CPUs (NVML_TOPOLOGY_SYSTEM), as on a two-socket 8-GPU server; a GPU and itself are
 * NVML_TOPOLOGY_INTERNAL. NVIDIA's device plugin asks it for every pair before it prefers GPUs
 * for a pod of more than one (go-gpuallocator); without an answer the kubelet's allocation
 * fails. */
nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1, nvmlDevice_t device2,
                                                 nvmlGpuTopologyLevel_t *pathInfo) {
    ENTER("nvmlDeviceGetTopologyCommonAncestor");
    sim_node node;
    target a, b;
    nvmlReturn_t r = begin(&node, 0, device1.handle, GPU, &a);
    if (r) return r;
    if (!pathInfo || !resolve(&node, device2.handle, GPU, &b)) return end(&node, NVML_ERROR_INVALID_ARGUMENT);
    int count = sim_gpu_count(&node);
    int half = count > 1 ? (count + 1) / 2 : 1;
    if (a.index == b.index)
        *pathInfo = NVML_TOPOLOGY_INTERNAL;
    else if (a.index / half == b.index / half)
        *pathInfo = NVML_TOPOLOGY_NODE;
    else
        *pathInfo = NVML_TOPOLOGY_SYSTEM;
    return end(&node, NVML_SUCCESS);
}

static nvmlReturn_t pci_info(nvmlDevice_t device, nvmlPciInfo_t *pci) {
    sim_node node;
    target t;
    nvmlReturn_t r = begin(&node, 0, device.handle, GPU, &t);
    if (r) return r;
    if (!pci) return end(&node, NVML_ERROR_INVALID_ARGUMENT);
    jv *facts = json_get(t.gpu, "pci");
    const char *bus_id = json_key_str(facts, "bus_id");
    unsigned domain = 0, bus = 0, slot = 0, function = 0;
    if (!bus_id || sscanf(bus_id, "%x:%x:%x.%x", &domain, &bus, &slot, &function) != 4)
        return end(&node, NVML_ERROR_UNKNOWN);
    memset(pci, 0, sizeof *pci);
    const char *rest = strchr(bus_id, ':') + 1; /* "18:00.0", in the file's case */
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04x:%s", domain & 0xFFFF, rest);
    snprintf(pci->busId, sizeof pci->busId, "%s", bus_id);
    pci->domain = domain;
    pci->bus = bus;
    pci->device = slot;
    pci->pciDeviceId = (unsigned)json_key_num(facts, "device_id", 0);
    pci->pciSubSystemId = (unsigned)json_key_num(facts, "subsystem_id", 0);
    return end(&node, NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *p) {
    return ENTER("nvmlDeviceGetPciInfo_v3"), pci_info(d, p);
}
nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t d, nvmlPciInfo_t *p) {
    return ENTER("nvmlDeviceGetPciInfo_v2"), pci_info(d, p);
}
nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t d, nvmlPciInfo_t *p) {
    return ENTER("nvmlDeviceGetPciInfo"), pci_info(d, p);
}

static unsigned long long used_by(const target *t) {
    jv *found[256];
    unsigned gi = t->gi ? (unsigned)json_key_num(t->gi, "id", 0) : SIM_NOT_AVAILABLE;
    int n = sim_processes(t->gpu, gi, SIM_NOT_AVAILABLE, found, 256);
    unsigned long long used = 0;
    for (int i = 0; i < n && i < 256; i++) used += (unsigned long long)json_key_num(found[i], "used_memory", 0);
    return used;
}

/* (total, reserved, used) in bytes of a GPU, or of a MIG device's GPU instance. */
static void memory_of(const target *t, unsigned long long *total, unsigned long long *reserved,
                      unsigned long long *used) {
    *used = used_by(t);
    if (t->kind == MIG) {
        *total = gi_profile_of(t).memory_mb * MIB;
        *reserved = 0;
        return;
    }
    jv *memory = json_get(t->gpu, "memory");
    *total = (unsigned long long)json_key_num(memory, "total", 0);
    *reserved = (unsigned long long)json_key_num(memory, "reserved", 0);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
    ENTER("nvmlDeviceGetMemoryInfo");
    sim_node node;
    target t;
    nvmlReturn_t r = begin(&node, 0, device.handle, GPU | MIG, &t);
    if (r) return r;
    if (!memory) return end(&node, NVML_ERROR_INVALID_ARGUMENT);
    unsigned long long total, reserved, used;
    memory_of(&t, &total, &reserved, &used);
    memory->total = total;
    memory->used = reserved + used; /* v1 counts what the driver reserves as used */
    memory->free = total - reserved - used;
    return end(&node, NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory) {
    ENTER("nvmlDeviceGetMemoryInfo_v2");
    sim_node node;
    target t;
    nvmlReturn_t r = begin(&node, 0, device.handle, GPU | MIG, &t);
    if (r) return r;
    if (!memory) return end(&node, NVML_ERROR_INVALID_ARGUMENT);
    if (memory->version != nvmlMemory_v2) return end(&node, NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    unsigned long long total, reserved, used;
    memory_of(&t, &total, &reserved, &used);
    memory->total = total;
    memory->reserved = reserved;
    memory->used = used;
    memory->free = total - reserved - used;
    return end(&node, NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor) {
    ENTER("nvmlDeviceGetCudaComputeCapability");
    sim_node node;
    target t;
    nvmlReturn_t r = begin(&node, 0, device.handle, GPU | MIG, &t);
    if (r) return r;
    if (!major || !minor) return end(&node, NVML_ERROR_INVALID_ARGUMENT);
    jv *cc = json_get(t.gpu, "cuda_compute_capability");
    *major = (int)json_num(json_at(cc, 0), 0);
    *minor = (int)json_num(json_at(cc, 1), 0);
    return end(&node, NVML_SUCCESS);
}

/* No simulated node is part of an NVLink fabric: a Hopper or newer GPU answers that its fabric
 * probe is not supported (state NOT_SUPPORTED, no cluster UUID or clique), older ones that the
 * call is not (nvml.h: "For Hopper or newer fully supported devices"). GFD v0.19.3 asks it for
 * its IMEX labels, which it then leaves out, as on the single H200 read in tests/data/nvidia. */
nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t device, nvmlGpuFabricInfoV_t *info) {
    ENTER("nvmlDeviceGetGpuFabricInfoV");
    sim_node node;
    target t;
    nvmlReturn_t r = begin(&node, 0, device.handle, GPU, &t);
    if (r) return r;
    if (!info) return end(&node, NVML_ERROR_INVALID_ARGUMENT);
    if (info->version != nvmlGpuFabricInfo_v2 && info->version != nvmlGpuFabricInfo_v3)
        return end(&node, NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    if ((int)json_num(json_at(json_get(t.gpu, "cuda_compute_capability"), 0), 0) < 9)
        return end(&node, NVML_ERROR_NOT_SUPPORTED);
    memset(info->clusterUuid, 0, sizeof info->clusterUuid);
    info->status = NVML_SUCCESS;
    info->cliqueId = 0;
    info->state = NVML_GPU_FABRIC_STATE_NOT_SUPPORTED;
    info->healthMask = 0;
    if (info->version == nvmlGpuFabricInfo_v3) info->healthSummary = 0;
    return end(&node, NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, nvmlDeviceArchitecture_t *arch) {
    ENTER("nvmlDeviceGetArchitecture");
    sim_node node;
    target t;
    nvmlReturn_t r = begin(&node, 0, device.handle, GPU | MIG, &t);
    if (r) return r;
    if (!arch) return end(&node, NVML_ERROR_INVALID_ARGUMENT);
    jv *cc = json_get(t.gpu, "cuda_compute_capability");
    int major = (int)json_num(json_at(cc, 0), 0), minor = (int)json_num(json_at(cc, 1), 0);
    /* compute capability per architecture: CUDA's published table */
    if (major == 7) *arch = minor >= 5 ? NVML_DEVICE_ARCH_TURING : NVML_DEVICE_ARCH_VOLTA;
    else if (major == 8) *arch = minor == 9 ? NVML_DEVICE_ARCH_ADA : NVML_DEVICE_ARCH_AMPERE;
    else if (major == 9) *arch = NVML_DEVICE_ARCH_HOPPER;
    else if (major == 10 || major == 12) *arch = NVML_DEVICE_ARCH_BLACKWELL;
    else *arch = NVML_DEVICE_ARCH_UNKNOWN;
    return end(&node, NVML_SUCCESS);
}

/* The product brand: every data-centre board the simulation models (A100, A30, H100, H200, L4,
 * B200) reports NVML_BRAND_NVIDIA ("Product Brand: NVIDIA" in nvidia-smi -q); a MIG device
 * answers for its GPU, as nvml.h documents no difference. */
nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t device, nvmlBrandType_t *type) {
    ENTER("nvmlDeviceGetBrand");
    sim_node node;
    target t;
    nvmlReturn_t r = begin(&node, 0, device.handle, GPU | MIG, &t);
    if (r) return r;
    if (!type) return end(&node, NVML_ERROR_INVALID_ARGUMENT);
    *type = NVML_BRAND_NVIDIA;
    return end(&node, NVML_SUCCESS);
}

/* The addressing mode (versioned struct): NONE, "neither HMM nor ATS is active", as on an x86
 * host whose kernel or driver modules do not enable HMM; a simulated node has no such kernel. */
nvmlReturn_t nvmlDeviceGetAddressingMode(nvmlDevice_t device, nvmlDeviceAddressingMode_t *mode) {
    ENTER("nvmlDeviceGetAddressingMode");
    sim_node node;
    target t;
    nvmlReturn_t r = begin(&node, 0, device.handle, GPU | MIG, &t);
    if (r) return r;
    if (!mode) return end(&node, NVML_ERROR_INVALID_ARGUMENT);
    if (mode->version != nvmlDeviceAddressingMode_v1)
        return end(&node, NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    mode->value = NVML_DEVICE_ADDRESSING_MODE_NONE;
    return end(&node, NVML_SUCCESS);
}

/* The virtualization mode: a simulated node's GPUs are bare metal (NVML_GPU_VIRTUALIZATION_MODE_NONE,
 * "Represents Bare Metal GPU"); a MIG device answers for its GPU. */
nvmlReturn_t nvmlDeviceGetVirtualizationMode(nvmlDevice_t device, nvmlGpuVirtualizationMode_t *mode) {
    ENTER("nvmlDeviceGetVirtualizationMode");
    sim_node node;
    target t;
    nvmlReturn_t r = begin(&node, 0, device.handle, GPU | MIG, &t);
    if (r) return r;
    if (!mode) return end(&node, NVML_ERROR_INVALID_ARGUMENT);
    *mode = NVML_GPU_VIRTUALIZATION_MODE_NONE;
    return end(&node, NVML_SUCCESS);
}

/* ---- processes ---------------------------------------------------------------------------- */

/* NVML's two-call pattern: *count in is the room, out the number running; INSUFFICIENT_SIZE
 * (with the number) when the caller's array is NULL or too small, unless none run. */
static nvmlReturn_t processes(nvmlDevice_t device, unsigned *count, void *infos, int v1) {
    sim_node node;
    target t;
    nvmlReturn_t r = begin(&node, 0, device.handle, GPU | MIG, &t);
    if (r) return r;
    if (!count) return end(&node, NVML_ERROR_INVALID_ARGUMENT);
    jv *found[256];
    unsigned gi = t.gi ? (unsigned)json_key_num(t.gi, "id", 0) : SIM_NOT_AVAILABLE;
    unsigned ci = t.ci ? (unsigned)json_key_num(t.ci, "id", 0) : SIM_NOT_AVAILABLE;
    int n = sim_processes(t.gpu, gi, ci, found, 256);
    if (n > 256) n = 256;
    unsigned room = *count;
    *count = (unsigned)n;
    if (!infos || room < (unsigned)n) return end(&node, n ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS);
    for (int i = 0; i < n; i++) {
        unsigned pid = (unsigned)json_key_num(found[i], "pid", 0);
        unsigned long long used = (unsigned long long)json_key_num(found[i], "used_memory", 0);
        if (v1) {
            nvmlProcessInfo_v1_t *info = (nvmlProcessInfo_v1_t *)infos + i;
            info->pid = pid;
            info->usedGpuMemory = used;
        } else {
            nvmlProcessInfo_t *info = (nvmlProcessInfo_t *)infos + i;
            info->pid = pid;
            info->usedGpuMemory = used;
            info->gpuInstanceId = (unsigned)json_key_num(found[i], "gpu_instance_id", SIM_NOT_AVAILABLE);
            info->computeInstanceId =
                (unsigned)json_key_num(found[i], "compute_instance_id", SIM_NOT_AVAILABLE);
        }
    }
    return end(&node, NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *n, nvmlProcessInfo_t *p) {
    return ENTER("nvmlDeviceGetComputeRunningProcesses_v3"), processes(d, n, p, 0);
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *n, nvmlProcessInfo_v2_t *p) {
    return ENTER("nvmlDeviceGetComputeRunningProcesses_v2"), processes(d, n, p, 0);
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int *n, nvmlProcessInfo_v1_t *p) {
    return ENTER("nvmlDeviceGetComputeRunningProcesses"), processes(d, n, p, 1);
}

static unsigned long long now_us(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (unsigned long long)tv.tv_sec * 1000000ULL + (unsigned long long)tv.tv_usec;
}

/* One sample per process with non-zero SM utilisation ("sm_percent" in the state file);
 * NOT_FOUND when there is none, NOT_SUPPORTED on a MIG-enabled GPU (nvml.h). */
nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                             nvmlProcessUtilizationSample_t *utilization,
                                             unsigned int *count,
                                             unsigned long long last_seen) {
    ENTER("nvmlDeviceGetProcessUtilization");
    sim_node node;
    target t;
    nvmlReturn_t r = begin(&node, 0, device.handle, GPU | MIG, &t);
    if (r) return r;
    if (t.kind == MIG || sim_mig_enabled(t.gpu)) return end(&node, NVML_ERROR_NOT_SUPPORTED);
    if (!count) return end(&node, NVML_ERROR_INVALID_ARGUMENT);
    jv *found[256], *busy[256];
    int n = sim_processes(t.gpu, SIM_NOT_AVAILABLE, SIM_NOT_AVAILABLE, found, 256), m = 0;
    unsigned long long stamp = now_us();
    for (int i = 0; i < n && i < 256; i++)
        if (json_key_num(found[i], "sm_percent", 0) > 0 && stamp > last_seen) busy[m++] = found[i];
    if (m == 0) return end(&node, NVML_ERROR_NOT_FOUND);
    unsigned room = *count;
    *count = (unsigned)m;
    if (!utilization || room < (unsigned)m) return end(&node, NVML_ERROR_INSUFFICIENT_SIZE);
    for (int i = 0; i < m; i++) {
        nvmlProcessUtilizationSample_t *s = utilization + i;
        memset(s, 0, sizeof *s);
        s->pid = (unsigned)json_key_num(busy[i], "pid", 0);
        s->timeStamp = stamp;
        long long sm = json_key_num(busy[i], "sm_percent", 0);
        s->smUtil = (unsigned)(sm > 100 ? 100 : sm);
        s->memUtil = (unsigned)json_key_num(busy[i], "mem_percent", 0);
    }
    return end(&node, NVML_SUCCESS);
}

/* The GPU's SM utilisation: the sum of its processes' (at most 100); NOT_SUPPORTED with MIG on. */
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization) {
    ENTER("nvmlDeviceGetUtilizationRates");
    sim_node node;
    target t;
    nvmlReturn_t r = begin(&node, 0, device.handle, GPU | MIG, &t);
    if (r) return r;
    if (t.kind == MIG || sim_mig_enabled(t.gpu)) return end(&node, NVML_ERROR_NOT_SUPPORTED);
    if (!utilization) return end(&node, NVML_ERROR_INVALID_ARGUMENT);
    jv *found[256];
    int n = sim_processes(t.gpu, SIM_NOT_AVAILABLE, SIM_NOT_AVAILABLE, found, 256);
    long long sm = 0, memory = 0;
    for (int i = 0; i < n && i < 256; i++) {
        sm += json_key_num(found[i], "sm_percent", 0);
        memory += json_key_num(found[i], "mem_percent", 0);
    }
    utilization->gpu = (unsigned)(sm > 100 ? 100 : sm);
    utilization->memory = (unsigned)(memory > 100 ? 100 : memory);
    return end(&node, NVML_SUCCESS);
}

/* ---- MIG mode ----------------------------------------------------------------------------- */

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *current, unsigned int *pending) {
    ENTER("nvmlDeviceGetMigMode");
    sim_node node;
    target t;
    nvmlReturn_t r = begin(&node, 0, device.handle, GPU, &t);
    if (r) return r;
    if (!sim_mig_capable(t.gpu)) return end(&node, NVML_ERROR_NOT_SUPPORTED);
    if (!current || !pending) return end(&node, NVML_ERROR_INVALID_ARGUMENT);
    *current = sim_mig_current(t.gpu);
    *pending = sim_mig_pending(t.gpu);
    return end(&node, NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceSetMigMode(nvmlDevice_t device, unsigned int mode, nvmlReturn_t *activation) {
    ENTER("nvmlDeviceSetMigMode");
    sim_node node;
    target t;
    nvmlReturn_t r = begin(&node, 1, device.handle, GPU, &t);
    if (r) return r;
    if (!activation) return end(&node, NVML_ERROR_INVALID_ARGUMENT);
    unsigned status = SIM_OK;
    int result = sim_set_mig_mode(t.gpu, mode, &status);
    *activation = (nvmlReturn_t)status;
    node.changed = result == SIM_OK;
    return end(&node, result);
}

/* ---- GPU-instance profiles ---------------------------------------------------------------- */

/* A whole GPU that supports MIG, mode on or off; else INVALID_ARGUMENT or NOT_SUPPORTED. */
static nvmlReturn_t mig_capable(sim_node *node, int writing, nvmlDevice_t device, target *t) {
    nvmlReturn_t r = begin(node, writing, device.handle, GPU, t);
    if (r) return r;
    if (!sim_mig_capable(t->gpu)) return end(node, NVML_ERROR_NOT_SUPPORTED);
    return NVML_SUCCESS;
}

/* A real driver answers with MIG mode off too, and takes an enum newer than itself for an
 * invalid argument rather than an unsupported profile (tests/data/nvml). */
static nvmlReturn_t gi_profile(nvmlDevice_t device, unsigned key_value, int by_id, void *info,
                               unsigned version) {
    sim_node node;
    target t;
    nvmlReturn_t r = begin(&node, 0, device.handle, GPU, &t);
    if (r) return r;
    if (!info || (!by_id && key_value >= PROFILE_ENUMS_THE_DRIVER_KNOWS))
        return end(&node, NVML_ERROR_INVALID_ARGUMENT);
    sim_gi_profile p;
    int found = by_id ? sim_profile_by_id(t.gpu, key_value, &p) : sim_profile_by_enum(t.gpu, key_value, &p);
    if (!found) return end(&node, NVML_ERROR_NOT_SUPPORTED);
    if (version == 1) {
        nvmlGpuInstanceProfileInfo_t *out = info;
        memset(out, 0, sizeof *out);
        out->id = p.id;
        out->sliceCount = p.slices;
        out->instanceCount = p.instances;
        out->multiprocessorCount = p.sms;
        out->copyEngineCount = p.copy_engines;
        out->decoderCount = p.decoders;
        out->encoderCount = p.encoders;
        out->jpegCount = p.jpegs;
        out->ofaCount = p.ofas;
        out->memorySizeMB = p.memory_mb;
    } else if (version == nvmlGpuInstanceProfileInfo_v2) {
        nvmlGpuInstanceProfileInfo_v2_t *out = info;
        memset(out, 0, sizeof *out); /* the real driver handed it back with version 0 */
        out->id = p.id;
        out->sliceCount = p.slices;
        out->instanceCount = p.instances;
        out->multiprocessorCount = p.sms;
        out->copyEngineCount = p.copy_engines;
        out->decoderCount = p.decoders;
        out->encoderCount = p.encoders;
        out->jpegCount = p.jpegs;
        out->ofaCount = p.ofas;
        out->memorySizeMB = p.memory_mb;
        snprintf(out->name, sizeof out->name, "%s", p.name);
    } else {
        nvmlGpuInstanceProfileInfo_v3_t *out = info;
        memset(out, 0, sizeof *out);
        out->id = p.id;
        out->sliceCount = p.slices;
        out->instanceCount = p.instances;
        out->multiprocessorCount = p.sms;
        out->copyEngineCount = p.copy_engines;
        out->decoderCount = p.decoders;
        out->encoderCount = p.encoders;
        out->jpegCount = p.jpegs;
        out->ofaCount = p.ofas;
        out->memorySizeMB = p.memory_mb;
        snprintf(out->name, sizeof out->name, "%s", p.name);
    }
    return end(&node, NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t device, unsigned int profile,
                                                 nvmlGpuInstanceProfileInfo_t *info) {
    return ENTER("nvmlDeviceGetGpuInstanceProfileInfo"), gi_profile(device, profile, 0, info, 1);
}

static unsigned struct_version(const void *info, unsigned v2, unsigned v3) {
    if (!info) return 0;
    unsigned version = *(const unsigned *)info;
    return version == v2 || version == v3 ? version : 0;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(nvmlDevice_t device, unsigned int profile,
                                                  nvmlGpuInstanceProfileInfo_v2_t *info) {
    ENTER("nvmlDeviceGetGpuInstanceProfileInfoV");
    unsigned version = struct_version(info, nvmlGpuInstanceProfileInfo_v2, nvmlGpuInstanceProfileInfo_v3);
    if (info && !version) return initialized() ? NVML_ERROR_ARGUMENT_VERSION_MISMATCH : NVML_ERROR_UNINITIALIZED;
    return gi_profile(device, profile, 0, info, version);
}

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoByIdV(nvmlDevice_t device, unsigned int id,
                                                      nvmlGpuInstanceProfileInfo_v2_t *info) {
    ENTER("nvmlDeviceGetGpuInstanceProfileInfoByIdV");
    unsigned version = struct_version(info, nvmlGpuInstanceProfileInfo_v2, nvmlGpuInstanceProfileInfo_v3);
    if (info && !version) return initialized() ? NVML_ERROR_ARGUMENT_VERSION_MISMATCH : NVML_ERROR_UNINITIALIZED;
    return gi_profile(device, id, 1, info, version);
}

/* "returns all the possible placements for the given profile regardless of whether MIG is
 * enabled or not" (nvml.h); the caller's array must hold them all. */
static nvmlReturn_t gi_placements(nvmlDevice_t device, unsigned id, nvmlGpuInstancePlacement_t *out,
                                  unsigned *count) {
    sim_node node;
    target t;
    nvmlReturn_t r = begin(&node, 0, device.handle, GPU, &t);
    if (r) return r;
    if (!count) return end(&node, NVML_ERROR_INVALID_ARGUMENT);
    sim_gi_profile p;
    if (!sim_profile_by_id(t.gpu, id, &p)) return end(&node, NVML_ERROR_NOT_SUPPORTED);
    *count = (unsigned)p.placement_count;
    for (int i = 0; out && i < p.placement_count; i++) {
        out[i].start = p.placements[i].start;
        out[i].size = p.placements[i].size;
    }
    return end(&node, NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements_v2(nvmlDevice_t device, unsigned int id,
                                                           nvmlGpuInstancePlacement_t *out,
                                                           unsigned int *count) {
    return ENTER("nvmlDeviceGetGpuInstancePossiblePlacements_v2"), gi_placements(device, id, out, count);
}
nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements(nvmlDevice_t device, unsigned int id,
                                                        nvmlGpuInstancePlacement_t *out,
                                                        unsigned int *count) {
    return ENTER("nvmlDeviceGetGpuInstancePossiblePlacements"), gi_placements(device, id, out, count);
}

nvmlReturn_t nvmlDeviceGetGpuInstanceRemainingCapacity(nvmlDevice_t device, unsigned int id,
                                                       unsigned int *count) {
    ENTER("nvmlDeviceGetGpuInstanceRemainingCapacity");
    sim_node node;
    target t;
    nvmlReturn_t r = begin(&node, 0, device.handle, GPU, &t); /* MIG off too, as a real driver */
    if (r) return r;
    sim_gi_profile p;
    if (!sim_profile_by_id(t.gpu, id, &p)) return end(&node, NVML_ERROR_NOT_SUPPORTED);
    if (!count) return end(&node, NVML_ERROR_INVALID_ARGUMENT);
    *count = sim_remaining_capacity(t.gpu, &p);
    return end(&node, NVML_SUCCESS);
}

/* ---- GPU instances ------------------------------------------------------------------------ */

static nvmlReturn_t create_gi(nvmlDevice_t device, unsigned id, const nvmlGpuInstancePlacement_t *at,
                              nvmlGpuInstance_t *instance) {
    sim_node node;
    target t;
    nvmlReturn_t r = mig_capable(&node, 1, device, &t);
    if (r) return r;
    if (!sim_mig_enabled(t.gpu)) return end(&node, NVML_ERROR_NOT_SUPPORTED);
    sim_gi_profile p;
    if (!sim_profile_by_id(t.gpu, id, &p) || !instance) return end(&node, NVML_ERROR_INVALID_ARGUMENT);
    sim_slot slot = {at ? at->start : 0, at ? at->size : 0};
    unsigned gi_id;
    int result = sim_create_gpu_instance(t.gpu, &p, at ? &slot : NULL, &gi_id);
    if (result == SIM_OK) {
        instance->handle = gi_handle(t.index, sim_gpu_instance(t.gpu, gi_id));
        node.changed = 1;
    }
    return end(&node, result);
}

nvmlReturn_t nvmlDeviceCreateGpuInstance(nvmlDevice_t device, unsigned int id, nvmlGpuInstance_t *gi) {
    return ENTER("nvmlDeviceCreateGpuInstance"), create_gi(device, id, NULL, gi);
}

nvmlReturn_t nvmlDeviceCreateGpuInstanceWithPlacement(nvmlDevice_t device, unsigned int id,
                                                      const nvmlGpuInstancePlacement_t *at,
                                                      nvmlGpuInstance_t *gi) {
    ENTER("nvmlDeviceCreateGpuInstanceWithPlacement");
    if (!at) return initialized() ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_UNINITIALIZED;
    return create_gi(device, id, at, gi);
}

nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t instance) {
    ENTER("nvmlGpuInstanceDestroy");
    sim_node node;
    target t;
    nvmlReturn_t r = begin(&node, 1, instance.handle, GI, &t);
    if (r) return r;
    int result = sim_destroy_gpu_instance(t.gpu, (unsigned)json_key_num(t.gi, "id", 0));
    node.changed = result == SIM_OK;
    return end(&node, result);
}

nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t device, unsigned int id,
                                       nvmlGpuInstance_t *instances, unsigned int *count) {
    ENTER("nvmlDeviceGetGpuInstances");
    sim_node node;
    target t;
    nvmlReturn_t r = mig_capable(&node, 0, device, &t); /* with MIG off: none */
    if (r) return r;
    sim_gi_profile p;
    if (!sim_profile_by_id(t.gpu, id, &p) || !count || !instances)
        return end(&node, NVML_ERROR_INVALID_ARGUMENT);
    jv *list = sim_gpu_instances(t.gpu);
    unsigned n = 0;
    for (int i = 0; i < json_len(list); i++) {
        jv *gi = json_at(list, i);
        if ((unsigned)json_key_num(gi, "profile_id", -1) == id) instances[n++].handle = gi_handle(t.index, gi);
    }
    *count = n;
    return end(&node, NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id, nvmlGpuInstance_t *instance) {
    ENTER("nvmlDeviceGetGpuInstanceById");
    sim_node node;
    target t;
    nvmlReturn_t r = mig_capable(&node, 0, device, &t); /* with MIG off: NOT_FOUND */
    if (r) return r;
    jv *gi = sim_gpu_instance(t.gpu, id);
    if (!gi) return end(&node, NVML_ERROR_NOT_FOUND);
    if (!instance) return end(&node, NVML_ERROR_INVALID_ARGUMENT);
    instance->handle = gi_handle(t.index, gi);
    return end(&node, NVML_SUCCESS);
}

nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t instance, nvmlGpuInstanceInfo_t *info) {
    ENTER("nvmlGpuInstanceGetInfo");
    sim_node node;
    target t;
    nvmlReturn_t r = begin(&node, 0, instance.handle, GI, &t);
    if (r) return r;
    if (!info) return end(&node, NVML_ERROR_INVALID_ARGUMENT);
    jv *at = json_get(t.gi, "placement");
    info->device.handle = gpu_handle(t.index);
    info->id = (unsigned)json_key_num(t.gi, "id", 0);
    info->profileId = (unsigned)json_key_num(t.gi, "profile_id", 0);
    info->placement.start = (unsigned)json_key_num(at, "start", 0);
    info->placement.size = (unsigned)json_key_num(at, "size", 0);
    return end(&node, NVML_SUCCESS);
}

/* ---- compute-instance profiles ------------------------------------------------------------ */

/* The GPU instance a handle names and one of its compute-instance profiles. */
static nvmlReturn_t gi_and_profile(sim_node *node, int writing, nvmlGpuInstance_t instance,
                                   unsigned enum_value, target *t, sim_gi_profile *gi,
                                   sim_ci_profile *ci) {
    nvmlReturn_t r = begin(node, writing, instance.handle, GI, t);
    if (r) return r;
    *gi = gi_profile_of(t);
    if (!sim_ci_profile_by_enum(gi, enum_value, ci)) return end(node, NVML_ERROR_NOT_SUPPORTED);
    return NVML_SUCCESS;
}

static nvmlReturn_t ci_profile(nvmlGpuInstance_t instance, unsigned enum_value, unsigned engines,
                               void *info, unsigned version) {
    sim_node node;
    target t;
    nvmlReturn_t r = begin(&node, 0, instance.handle, GI, &t);
    if (r) return r;
    if (!info || enum_value >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT ||
        engines >= NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_COUNT)
        return end(&node, NVML_ERROR_INVALID_ARGUMENT);
    sim_gi_profile gi = gi_profile_of(&t);
    sim_ci_profile p;
    if (!sim_ci_profile_by_enum(&gi, enum_value, &p)) return end(&node, NVML_ERROR_NOT_SUPPORTED);
    char name[64], full[80];
    sim_mig_device_profile(&gi, p.slices, name, sizeof name);
    snprintf(full, sizeof full, "MIG %s", name);
    /* engines are shared among the GPU instance's compute instances */
#define FILL(out)                                   \
    do {                                            \
        (out)->id = p.enum_value;                   \
        (out)->sliceCount = p.slices;               \
        (out)->instanceCount = (unsigned)p.start_count; \
        (out)->multiprocessorCount = p.sms;         \
        (out)->sharedCopyEngineCount = gi.copy_engines; \
        (out)->sharedDecoderCount = gi.decoders;    \
        (out)->sharedEncoderCount = gi.encoders;    \
        (out)->sharedJpegCount = gi.jpegs;          \
        (out)->sharedOfaCount = gi.ofas;            \
    } while (0)
    if (version == 1) {
        nvmlComputeInstanceProfileInfo_t *out = info;
        memset(out, 0, sizeof *out);
        FILL(out);
    } else if (version == nvmlComputeInstanceProfileInfo_v2) {
        nvmlComputeInstanceProfileInfo_v2_t *out = info;
        FILL(out);
        snprintf(out->name, sizeof out->name, "%s", full);
    } else {
        nvmlComputeInstanceProfileInfo_v3_t *out = info;
        FILL(out);
        snprintf(out->name, sizeof out->name, "%s", full);
    }
#undef FILL
    return end(&node, NVML_SUCCESS);
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t instance, unsigned int profile,
                                                          unsigned int engines,
                                                          nvmlComputeInstanceProfileInfo_t *info) {
    ENTER("nvmlGpuInstanceGetComputeInstanceProfileInfo");
    return ci_profile(instance, profile, engines, info, 1);
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfoV(nvmlGpuInstance_t instance, unsigned int profile,
                                                           unsigned int engines,
                                                           nvmlComputeInstanceProfileInfo_v2_t *info) {
    ENTER("nvmlGpuInstanceGetComputeInstanceProfileInfoV");
    unsigned version = struct_version(info, nvmlComputeInstanceProfileInfo_v2, nvmlComputeInstanceProfileInfo_v3);
    if (info && !version) return initialized() ? NVML_ERROR_ARGUMENT_VERSION_MISMATCH : NVML_ERROR_UNINITIALIZED;
    return ci_profile(instance, profile, engines, info, version);
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstancePossiblePlacements(nvmlGpuInstance_t instance, unsigned int id,
                                                                 nvmlComputeInstancePlacement_t *out,
                                                                 unsigned int *count) {
    ENTER("nvmlGpuInstanceGetComputeInstancePossiblePlacements");
    sim_node node;
    target t;
    sim_gi_profile gi;
    sim_ci_profile p;
    nvmlReturn_t r = gi_and_profile(&node, 0, instance, id, &t, &gi, &p);
    if (r) return r;
    if (!count) return end(&node, NVML_ERROR_INVALID_ARGUMENT);
    *count = (unsigned)p.start_count;
    for (int i = 0; out && i < p.start_count; i++) {
        out[i].start = p.starts[i];
        out[i].size = p.slices;
    }
    return end(&node, NVML_SUCCESS);
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceRemainingCapacity(nvmlGpuInstance_t instance, unsigned int id,
                                                                unsigned int *count) {
    ENTER("nvmlGpuInstanceGetComputeInstanceRemainingCapacity");
    sim_node node;
    target t;
    sim_gi_profile gi;
    sim_ci_profile p;
    nvmlReturn_t r = gi_and_profile(&node, 0, instance, id, &t, &gi, &p);
    if (r) return r;
    if (!count) return end(&node, NVML_ERROR_INVALID_ARGUMENT);
    *count = sim_ci_remaining_capacity(t.gi, &p);
    return end(&node, NVML_SUCCESS);
}

/* ---- compute instances -------------------------------------------------------------------- */

static nvmlReturn_t create_ci(nvmlGpuInstance_t instance, unsigned id,
                              const nvmlComputeInstancePlacement_t *at, nvmlComputeInstance_t *out) {
    sim_node node;
    target t;
    sim_gi_profile gi;
    sim_ci_profile p;
    nvmlReturn_t r = gi_and_profile(&node, 1, instance, id, &t, &gi, &p);
    if (r) return r;
    if (!out || (at && at->size != p.slices)) return end(&node, NVML_ERROR_INVALID_ARGUMENT);
    unsigned ci_id;
    int result = sim_create_compute_instance(t.gpu, t.gi, &p, at ? (int)at->start : -1, &ci_id);
    if (result == SIM_OK) {
        out->handle = ci_handle(CI, t.index, t.gi, sim_compute_instance(t.gi, ci_id));
        node.changed = 1;
    }
    return end(&node, result);
}

nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t instance, unsigned int id,
                                                  nvmlComputeInstance_t *out) {
    return ENTER("nvmlGpuInstanceCreateComputeInstance"), create_ci(instance, id, NULL, out);
}

nvmlReturn_t nvmlGpuInstanceCreateComputeInstanceWithPlacement(nvmlGpuInstance_t instance, unsigned int id,
                                                               const nvmlComputeInstancePlacement_t *at,
                                                               nvmlComputeInstance_t *out) {
    ENTER("nvmlGpuInstanceCreateComputeInstanceWithPlacement");
    if (!at) return initialized() ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_UNINITIALIZED;
    return create_ci(instance, id, at, out);
}

nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t instance) {
    ENTER("nvmlComputeInstanceDestroy");
    sim_node node;
    target t;
    nvmlReturn_t r = begin(&node, 1, instance.handle, CI, &t);
    if (r) return r;
    int result = sim_destroy_compute_instance(t.gpu, t.gi, (unsigned)json_key_num(t.ci, "id", 0));
    node.changed = result == SIM_OK;
    return end(&node, result);
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t instance, unsigned int id,
                                                nvmlComputeInstance_t *instances, unsigned int *count) {
    ENTER("nvmlGpuInstanceGetComputeInstances");
    sim_node node;
    target t;
    sim_gi_profile gi;
    sim_ci_profile p;
    nvmlReturn_t r = gi_and_profile(&node, 0, instance, id, &t, &gi, &p);
    if (r) return r;
    if (!count || !instances) return end(&node, NVML_ERROR_INVALID_ARGUMENT);
    jv *list = json_get(t.gi, "compute_instances");
    unsigned n = 0;
    for (int i = 0; i < json_len(list); i++) {
        jv *ci = json_at(list, i);
        if ((unsigned)json_key_num(ci, "profile_id", -1) == id)
            instances[n++].handle = ci_handle(CI, t.index, t.gi, ci);
    }
    *count = n;
    return end(&node, NVML_SUCCESS);
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceById(nvmlGpuInstance_t instance, unsigned int id,
                                                   nvmlComputeInstance_t *out) {
    ENTER("nvmlGpuInstanceGetComputeInstanceById");
    sim_node node;
    target t;
    nvmlReturn_t r = begin(&node, 0, instance.handle, GI, &t);
    if (r) return r;
    jv *ci = sim_compute_instance(t.gi, id);
    if (!ci) return end(&node, NVML_ERROR_NOT_FOUND);
    if (!out) return end(&node, NVML_ERROR_INVALID_ARGUMENT);
    out->handle = ci_handle(CI, t.index, t.gi, ci);
    return end(&node, NVML_SUCCESS);
}

static nvmlReturn_t ci_info(nvmlComputeInstance_t instance, nvmlComputeInstanceInfo_t *info) {
    sim_node node;
    target t;
    nvmlReturn_t r = begin(&node, 0, instance.handle, CI, &t);
    if (r) return r;
    if (!info) return end(&node, NVML_ERROR_INVALID_ARGUMENT);
    info->device.handle = gpu_handle(t.index);
    info->gpuInstance.handle = gi_handle(t.index, t.gi);
    info->id = (unsigned)json_key_num(t.ci, "id", 0);
    info->profileId = (unsigned)json_key_num(t.ci, "profile_id", 0);
    info->placement.start = (unsigned)json_key_num(t.ci, "start", 0);
    info->placement.size = (unsigned)json_key_num(t.ci, "slices", 0);
    return end(&node, NVML_SUCCESS);
}

nvmlReturn_t nvmlComputeInstanceGetInfo_v2(nvmlComputeInstance_t instance, nvmlComputeInstanceInfo_t *info) {
    return ENTER("nvmlComputeInstanceGetInfo_v2"), ci_info(instance, info);
}
nvmlReturn_t nvmlComputeInstanceGetInfo(nvmlComputeInstance_t instance, nvmlComputeInstanceInfo_t *info) {
    return ENTER("nvmlComputeInstanceGetInfo"), ci_info(instance, info);
}

/* ---- MIG device handles ------------------------------------------------------------------- */

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count) {
    ENTER("nvmlDeviceGetMaxMigDeviceCount");
    sim_node node;
    target t;
    nvmlReturn_t r = begin(&node, 0, device.handle, GPU, &t);
    if (r) return r;
    if (!count) return end(&node, NVML_ERROR_INVALID_ARGUMENT);
    *count = sim_max_mig_devices(t.gpu);
    return end(&node, NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index, nvmlDevice_t *mig) {
    ENTER("nvmlDeviceGetMigDeviceHandleByIndex");
    sim_node node;
    target t;
    nvmlReturn_t r = mig_capable(&node, 0, device, &t);
    if (r) return r;
    if (!sim_mig_enabled(t.gpu)) return end(&node, NVML_ERROR_NOT_FOUND); /* a real driver, MIG off */
    if (index >= sim_max_mig_devices(t.gpu) || !mig) return end(&node, NVML_ERROR_INVALID_ARGUMENT);
    jv *gis = sim_gpu_instances(t.gpu);
    unsigned position = 0;
    for (int i = 0; i < json_len(gis); i++) { /* by GPU instance ID, then compute instance ID */
        jv *cis = json_get(json_at(gis, i), "compute_instances");
        for (int j = 0; j < json_len(cis); j++, position++) {
            if (position == index) {
                mig->handle = ci_handle(MIG, t.index, json_at(gis, i), json_at(cis, j));
                return end(&node, NVML_SUCCESS);
            }
        }
    }
    return end(&node, NVML_ERROR_NOT_FOUND);
}

nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *is_mig) {
    ENTER("nvmlDeviceIsMigDeviceHandle");
    sim_node node;
    target t;
    nvmlReturn_t r = begin(&node, 0, device.handle, GPU | MIG, &t);
    if (r) return r;
    if (!is_mig) return end(&node, NVML_ERROR_INVALID_ARGUMENT);
    *is_mig = t.kind == MIG;
    return end(&node, NVML_SUCCESS);
}

static nvmlReturn_t mig_id(nvmlDevice_t device, unsigned *out, int compute) {
    sim_node node;
    target t;
    nvmlReturn_t r = begin(&node, 0, device.handle, MIG, &t);
    if (r) return r;
    if (!out) return end(&node, NVML_ERROR_INVALID_ARGUMENT);
    *out = (unsigned)json_key_num(compute ? t.ci : t.gi, "id", 0);
    return end(&node, NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id) {
    return ENTER("nvmlDeviceGetGpuInstanceId"), mig_id(device, id, 0);
}
nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id) {
    return ENTER("nvmlDeviceGetComputeInstanceId"), mig_id(device, id, 1);
}

nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t mig, nvmlDevice_t *device) {
    ENTER("nvmlDeviceGetDeviceHandleFromMigDeviceHandle");
    sim_node node;
    target t;
    nvmlReturn_t r = begin(&node, 0, mig.handle, MIG, &t);
    if (r) return r;
    if (!device) return end(&node, NVML_ERROR_INVALID_ARGUMENT);
    device->handle = gpu_handle(t.index);
    return end(&node, NVML_SUCCESS);
}

/* A MIG device's share of its GPU (nvmlDeviceGetAttributes: MIG device handles only). */
static nvmlReturn_t attributes_of(nvmlDevice_t device, nvmlDeviceAttributes_t *attributes) {
    sim_node node;
    target t;
    nvmlReturn_t r = begin(&node, 0, device.handle, GPU | MIG, &t);
    if (r) return r;
    if (t.kind != MIG) return end(&node, NVML_ERROR_NOT_SUPPORTED);
    if (!attributes) return end(&node, NVML_ERROR_INVALID_ARGUMENT);
    sim_gi_profile gi = gi_profile_of(&t);
    sim_ci_profile ci;
    if (!sim_ci_profile_by_enum(&gi, (unsigned)json_key_num(t.ci, "profile_id", 0), &ci))
        return end(&node, NVML_ERROR_UNKNOWN);
    memset(attributes, 0, sizeof *attributes);
    attributes->multiprocessorCount = ci.sms;
    attributes->sharedCopyEngineCount = gi.copy_engines;
    attributes->sharedDecoderCount = gi.decoders;
    attributes->sharedEncoderCount = gi.encoders;
    attributes->sharedJpegCount = gi.jpegs;
    attributes->sharedOfaCount = gi.ofas;
    attributes->gpuInstanceSliceCount = gi.slices;
    attributes->computeInstanceSliceCount = ci.slices;
    attributes->memorySizeMB = gi.memory_mb;
    return end(&node, NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t device, nvmlDeviceAttributes_t *attributes) {
    return ENTER("nvmlDeviceGetAttributes_v2"), attributes_of(device, attributes);
}
nvmlReturn_t nvmlDeviceGetAttributes(nvmlDevice_t device, nvmlDeviceAttributes_t *attributes) {
    return ENTER("nvmlDeviceGetAttributes"), attributes_of(device, attributes);
}

/* ---- event sets: Xid errors ----------------------------------------------------------------
 *
 * A GPU's Xid errors are the "xid_events" of its record in the state file ({seq, xid,
 * gpu_instance_id, compute_instance_id}, appended by the simulation: FakeLibNvml.raise_xid).
 * A registration sees the events raised after it; nvmlEventSetWait polls the file until one
 * arrives or the timeout passes (NVML_ERROR_TIMEOUT). */

#define SUPPORTED_EVENTS                                                                     \
    (nvmlEventTypeXidCriticalError | nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError)
#define MAX_REGISTRATIONS 64

struct nvmlEventSet_st {
    int count;
    struct {
        int gpu;
        unsigned long long types;
        long long seen; /* the last event sequence number delivered or present at registration */
    } registrations[MAX_REGISTRATIONS];
    pthread_mutex_t lock;
};

#define MAX_SETS 1024
static struct nvmlEventSet_st *sets[MAX_SETS];
static pthread_mutex_t sets_lock = PTHREAD_MUTEX_INITIALIZER;

static struct nvmlEventSet_st *known_set(const void *handle) {
    struct nvmlEventSet_st *found = NULL;
    pthread_mutex_lock(&sets_lock);
    for (int i = 0; i < MAX_SETS && !found; i++)
        if (handle && sets[i] == handle) found = sets[i];
    pthread_mutex_unlock(&sets_lock);
    return found;
}

static long long last_seq(const jv *gpu) {
    jv *events = json_get(gpu, "xid_events");
    long long last = 0;
    for (int i = 0; i < json_len(events); i++) {
        long long seq = json_key_num(json_at(events, i), "seq", 0);
        if (seq > last) last = seq;
    }
    return last;
}

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set) {
    ENTER("nvmlEventSetCreate");
    sim_node node;
    target t;
    nvmlReturn_t r = begin(&node, 0, NULL, 0, &t);
    if (r) return r;
    if (!set) return end(&node, NVML_ERROR_INVALID_ARGUMENT);
    struct nvmlEventSet_st *made = calloc(1, sizeof *made);
    if (!made) return end(&node, NVML_ERROR_MEMORY);
    pthread_mutex_init(&made->lock, NULL);
    pthread_mutex_lock(&sets_lock);
    int slot = -1;
    for (int i = 0; i < MAX_SETS && slot < 0; i++)
        if (!sets[i]) slot = i;
    if (slot >= 0) sets[slot] = made;
    pthread_mutex_unlock(&sets_lock);
    if (slot < 0) {
        free(made);
        return end(&node, NVML_ERROR_INSUFFICIENT_RESOURCES);
    }
    set->handle = made;
    return end(&node, NVML_SUCCESS);
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
    ENTER("nvmlEventSetFree");
    if (!initialized()) return NVML_ERROR_UNINITIALIZED;
    struct nvmlEventSet_st *found = NULL;
    pthread_mutex_lock(&sets_lock);
    for (int i = 0; i < MAX_SETS && !found; i++) {
        if (set.handle && sets[i] == set.handle) {
            found = sets[i];
            sets[i] = NULL;
        }
    }
    pthread_mutex_unlock(&sets_lock);
    if (!found) return NVML_ERROR_INVALID_ARGUMENT;
    pthread_mutex_destroy(&found->lock);
    free(found);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long *types) {
    ENTER("nvmlDeviceGetSupportedEventTypes");
    sim_node node;
    target t;
    nvmlReturn_t r = begin(&node, 0, device.handle, GPU | MIG, &t);
    if (r) return r;
    if (!types) return end(&node, NVML_ERROR_INVALID_ARGUMENT);
    *types = SUPPORTED_EVENTS;
    return end(&node, NVML_SUCCESS);
}

/* A MIG device's events are its GPU's, told apart by the instance IDs in the event data. */
nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long types, nvmlEventSet_t set) {
    ENTER("nvmlDeviceRegisterEvents");
    sim_node node;
    target t;
    nvmlReturn_t r = begin(&node, 0, device.handle, GPU | MIG, &t);
    if (r) return r;
    struct nvmlEventSet_st *s = known_set(set.handle);
    if (!s || !types) return end(&node, NVML_ERROR_INVALID_ARGUMENT);
    if (types & ~(unsigned long long)SUPPORTED_EVENTS) return end(&node, NVML_ERROR_NOT_SUPPORTED);
    pthread_mutex_lock(&s->lock);
    int result = NVML_SUCCESS, i = 0;
    while (i < s->count && s->registrations[i].gpu != t.index) i++;
    if (i == s->count && s->count == MAX_REGISTRATIONS) {
        result = NVML_ERROR_INSUFFICIENT_RESOURCES;
    } else if (i == s->count) {
        s->registrations[i].gpu = t.index;
        s->registrations[i].seen = last_seq(t.gpu);
        s->registrations[i].types = 0;
        s->count++;
    }
    if (result == NVML_SUCCESS) s->registrations[i].types |= types;
    pthread_mutex_unlock(&s->lock);
    return end(&node, result);
}

/* The oldest event after `seen` of a registration, if any. */
static int next_event(sim_node *node, struct nvmlEventSet_st *s, nvmlEventData_t *data) {
    for (int i = 0; i < s->count; i++) {
        jv *gpu = sim_gpu(node, s->registrations[i].gpu);
        jv *events = json_get(gpu, "xid_events");
        jv *oldest = NULL;
        for (int j = 0; j < json_len(events); j++) {
            jv *e = json_at(events, j);
            long long seq = json_key_num(e, "seq", 0);
            if (seq > s->registrations[i].seen && (!oldest || seq < json_key_num(oldest, "seq", 0)))
                oldest = e;
        }
        if (!oldest) continue;
        s->registrations[i].seen = json_key_num(oldest, "seq", 0);
        if (!(s->registrations[i].types & nvmlEventTypeXidCriticalError)) continue;
        memset(data, 0, sizeof *data);
        data->device.handle = gpu_handle(s->registrations[i].gpu);
        data->eventType = nvmlEventTypeXidCriticalError;
        data->eventData = (unsigned long long)json_key_num(oldest, "xid", 999);
        data->gpuInstanceId = (unsigned)json_key_num(oldest, "gpu_instance_id", SIM_NOT_AVAILABLE);
        data->computeInstanceId = (unsigned)json_key_num(oldest, "compute_instance_id", SIM_NOT_AVAILABLE);
        return 1;
    }
    return 0;
}

static nvmlReturn_t wait_event(nvmlEventSet_t set, nvmlEventData_t *data, unsigned timeout_ms) {
    struct nvmlEventSet_st *s = known_set(set.handle);
    if (!initialized()) return NVML_ERROR_UNINITIALIZED;
    if (!s || !data) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned long long deadline = now_us() + (unsigned long long)timeout_ms * 1000ULL;
    for (;;) {
        sim_node node;
        target t;
        nvmlReturn_t r = begin(&node, 0, NULL, 0, &t);
        if (r) return r;
        pthread_mutex_lock(&s->lock);
        int found = next_event(&node, s, data);
        pthread_mutex_unlock(&s->lock);
        end(&node, NVML_SUCCESS);
        if (found) return NVML_SUCCESS;
        unsigned long long now = now_us();
        if (now >= deadline) return NVML_ERROR_TIMEOUT;
        unsigned long long pause = deadline - now < 50000ULL ? deadline - now : 50000ULL;
        struct timespec ts = {0, (long)(pause * 1000ULL)};
        nanosleep(&ts, NULL);
    }
}

nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeout_ms) {
    return ENTER("nvmlEventSetWait_v2"), wait_event(set, data, timeout_ms);
}
nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeout_ms) {
    return ENTER("nvmlEventSetWait"), wait_event(set, data, timeout_ms);
}
