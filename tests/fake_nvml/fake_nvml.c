/*
 * A fake libnvidia-ml.so.1 for tests: the few dozen NVML symbols that pynvml
 * (nvidia-ml-py) and distributed call, answering from a small config file so the
 * REAL pynvml ctypes code runs in real worker processes on a machine with no GPU.
 *
 * The config file is named by the environment variable FAKE_NVML_CONFIG and read
 * at the first nvmlInit of the process.  One directive per line, '#' comments:
 *
 *   init_error 9                      nvmlInit fails with this NVML return code
 *   device uuid=GPU-... name="Fake A100" total=40G used=1G,2G util=10,50,90
 *          power=250,300 temp=60 step_ms=100 unsupported=power,temperature
 *          lost_flag=/tmp/gone mig=1
 *   mig parent=0 uuid=MIG-... name="Fake A100 MIG 1g.5gb" total=5G used=1G
 *
 * Series (used, util, power in watts, temp in C) advance one value every step_ms
 * milliseconds since nvmlInit, cyclically.  A device whose lost_flag file exists
 * answers NVML_ERROR_GPU_IS_LOST, as a GPU that fell off the bus does.  Names in
 * unsupported= answer NVML_ERROR_NOT_SUPPORTED: memory, utilization, power,
 * temperature, name, mig.  MIG devices, like real ones, do not support
 * utilization, power or temperature; a MIG-enabled parent does not support
 * utilization.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef int nvmlReturn_t;
#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_GPU_IS_LOST 15
#define NVML_ERROR_ARGUMENT_VERSION_MISMATCH 25
#define NVML_ERROR_UNKNOWN 999

#define MAX_DEVICES 16
#define MAX_MIGS 8
#define MAX_SERIES 64

enum { U_MEMORY = 1, U_UTIL = 2, U_POWER = 4, U_TEMP = 8, U_NAME = 16, U_MIG = 32 };

typedef struct {
    int n;
    unsigned long long v[MAX_SERIES];
} series_t;

typedef struct fake_device {
    int is_mig;
    int index; /* NVML index of a GPU; slot of a MIG device within its parent */
    struct fake_device *parent;
    char uuid[96];
    char name[96];
    unsigned long long total;
    series_t used, util, power, temp;
    long step_ms;
    unsigned unsupported;
    char lost_flag[512];
    int mig_mode;
    struct fake_device *migs[MAX_MIGS];
    int n_migs;
} fake_device;

typedef fake_device *nvmlDevice_t;

typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct { unsigned int version; unsigned long long total, reserved, free, used; } nvmlMemory_v2_t;
typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;
#define NVML_MEMORY_V2 0x02000028u

static fake_device g_devices[MAX_DEVICES];
static int g_n_devices = 0;
static fake_device g_migs[MAX_DEVICES * MAX_MIGS];
static int g_n_migs = 0;
static int g_init_error = 0;
static int g_loaded = 0;
static int g_refcount = 0;
static struct timespec g_t0;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned long long parse_size(const char *s) {
    char *end;
    double x = strtod(s, &end);
    switch (*end) {
        case 'K': case 'k': x *= 1024.0; break;
        case 'M': case 'm': x *= 1024.0 * 1024.0; break;
        case 'G': case 'g': x *= 1024.0 * 1024.0 * 1024.0; break;
        default: break;
    }
    return (unsigned long long)x;
}

static void parse_series(series_t *s, const char *value, int sizes) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", value);
    s->n = 0;
    for (char *tok = strtok(buf, ","); tok && s->n < MAX_SERIES; tok = strtok(NULL, ",")) {
        s->v[s->n++] = sizes ? parse_size(tok) : strtoull(tok, NULL, 10);
    }
}

static unsigned parse_unsupported(const char *value) {
    unsigned mask = 0;
    if (strstr(value, "memory")) mask |= U_MEMORY;
    if (strstr(value, "utilization")) mask |= U_UTIL;
    if (strstr(value, "power")) mask |= U_POWER;
    if (strstr(value, "temperature")) mask |= U_TEMP;
    if (strstr(value, "name")) mask |= U_NAME;
    if (strstr(value, "mig")) mask |= U_MIG;
    return mask;
}

/* Next key=value (value optionally "quoted") from *p; 0 at end of line. */
static int next_pair(char **p, char *key, size_t klen, char *val, size_t vlen) {
    char *s = *p;
    while (*s == ' ' || *s == '\t') s++;
    if (!*s || *s == '\n' || *s == '#') return 0;
    size_t k = 0;
    while (*s && *s != '=' && *s != ' ' && *s != '\n' && k + 1 < klen) key[k++] = *s++;
    key[k] = 0;
    size_t v = 0;
    if (*s == '=') {
        s++;
        if (*s == '"') {
            s++;
            while (*s && *s != '"' && v + 1 < vlen) val[v++] = *s++;
            if (*s == '"') s++;
        } else {
            while (*s && *s != ' ' && *s != '\t' && *s != '\n' && v + 1 < vlen) val[v++] = *s++;
        }
    }
    val[v] = 0;
    *p = s;
    return 1;
}

static void apply_pair(fake_device *d, const char *key, const char *val) {
    if (!strcmp(key, "uuid")) snprintf(d->uuid, sizeof d->uuid, "%s", val);
    else if (!strcmp(key, "name")) snprintf(d->name, sizeof d->name, "%s", val);
    else if (!strcmp(key, "total")) d->total = parse_size(val);
    else if (!strcmp(key, "used")) parse_series(&d->used, val, 1);
    else if (!strcmp(key, "util")) parse_series(&d->util, val, 0);
    else if (!strcmp(key, "power")) parse_series(&d->power, val, 0);
    else if (!strcmp(key, "temp")) parse_series(&d->temp, val, 0);
    else if (!strcmp(key, "step_ms")) d->step_ms = atol(val);
    else if (!strcmp(key, "unsupported")) d->unsupported = parse_unsupported(val);
    else if (!strcmp(key, "lost_flag")) snprintf(d->lost_flag, sizeof d->lost_flag, "%s", val);
    else if (!strcmp(key, "mig")) d->mig_mode = atoi(val);
}

static void defaults(fake_device *d, int index) {
    memset(d, 0, sizeof *d);
    d->index = index;
    d->step_ms = 100;
    d->total = 16ULL << 30;
    snprintf(d->name, sizeof d->name, "Fake GPU");
}

static void load_config(void) {
    const char *path = getenv("FAKE_NVML_CONFIG");
    g_n_devices = 0;
    g_n_migs = 0;
    g_init_error = 0;
    if (!path) return;
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[4096], key[64], val[1024];
    while (fgets(line, sizeof line, f)) {
        char *p = line;
        while (*p == ' ' || *p == '\t') p++;
        if (!strncmp(p, "init_error", 10)) {
            g_init_error = atoi(p + 10);
        } else if (!strncmp(p, "device", 6) && g_n_devices < MAX_DEVICES) {
            fake_device *d = &g_devices[g_n_devices];
            defaults(d, g_n_devices);
            p += 6;
            while (next_pair(&p, key, sizeof key, val, sizeof val)) apply_pair(d, key, val);
            g_n_devices++;
        } else if (!strncmp(p, "mig", 3) && g_n_migs < MAX_DEVICES * MAX_MIGS) {
            fake_device *m = &g_migs[g_n_migs];
            defaults(m, 0);
            m->is_mig = 1;
            int parent = -1;
            p += 3;
            while (next_pair(&p, key, sizeof key, val, sizeof val)) {
                if (!strcmp(key, "parent")) parent = atoi(val);
                else apply_pair(m, key, val);
            }
            if (parent >= 0 && parent < g_n_devices && g_devices[parent].n_migs < MAX_MIGS) {
                fake_device *pd = &g_devices[parent];
                m->parent = pd;
                m->index = pd->n_migs;
                pd->migs[pd->n_migs++] = m;
                g_n_migs++;
            }
        }
    }
    fclose(f);
}

static long elapsed_ms(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (now.tv_sec - g_t0.tv_sec) * 1000L + (now.tv_nsec - g_t0.tv_nsec) / 1000000L;
}

static unsigned long long at(const fake_device *d, const series_t *s, unsigned long long dflt) {
    if (s->n == 0) return dflt;
    long step = d->step_ms > 0 ? d->step_ms : 100;
    return s->v[(elapsed_ms() / step) % s->n];
}

static int is_lost(const fake_device *d) {
    struct stat st;
    const fake_device *g = d->is_mig ? d->parent : d;
    if (g->lost_flag[0] && stat(g->lost_flag, &st) == 0) return 1;
    return d->lost_flag[0] && stat(d->lost_flag, &st) == 0;
}

/* Common entry checks: initialised, a known handle, not lost. */
static nvmlReturn_t check(nvmlDevice_t d) {
    if (g_refcount <= 0) return NVML_ERROR_UNINITIALIZED;
    if (!d) return NVML_ERROR_INVALID_ARGUMENT;
    int known = (d >= g_devices && d < g_devices + g_n_devices) || (d >= g_migs && d < g_migs + g_n_migs);
    if (!known) return NVML_ERROR_INVALID_ARGUMENT;
    if (is_lost(d)) return NVML_ERROR_GPU_IS_LOST;
    return NVML_SUCCESS;
}

/* ---- init / shutdown / errors ------------------------------------------- */
nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    pthread_mutex_lock(&g_lock);
    if (!g_loaded) {
        load_config();
        clock_gettime(CLOCK_MONOTONIC, &g_t0);
        g_loaded = 1;
    }
    nvmlReturn_t ret = g_init_error;
    if (ret == NVML_SUCCESS) g_refcount++;
    pthread_mutex_unlock(&g_lock);
    return ret;
}
nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
nvmlReturn_t nvmlInit(void) { return nvmlInitWithFlags(0); }

nvmlReturn_t nvmlShutdown(void) {
    pthread_mutex_lock(&g_lock);
    nvmlReturn_t ret = g_refcount > 0 ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
    if (g_refcount > 0) g_refcount--;
    pthread_mutex_unlock(&g_lock);
    return ret;
}

const char *nvmlErrorString(nvmlReturn_t r) {
    switch (r) {
        case NVML_SUCCESS: return "Success";
        case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
        case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
        case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
        case NVML_ERROR_NOT_FOUND: return "Not Found";
        case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
        case 9: return "Driver Not Loaded";
        case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
        case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
        default: return "Unknown Error";
    }
}

static nvmlReturn_t copy_str(char *dst, unsigned int len, const char *src) {
    if (!dst) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(src) + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(dst, src, strlen(src) + 1);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int len) {
    if (g_refcount <= 0) return NVML_ERROR_UNINITIALIZED;
    return copy_str(version, len, "999.99.99-fake");
}
nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int len) {
    return copy_str(version, len, "13.999.99-fake");
}
nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v) { if (!v) return NVML_ERROR_INVALID_ARGUMENT; *v = 13000; return NVML_SUCCESS; }
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) { return nvmlSystemGetCudaDriverVersion(v); }

/* ---- enumeration ---------------------------------------------------------- */
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    if (g_refcount <= 0) return NVML_ERROR_UNINITIALIZED;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    *count = (unsigned int)g_n_devices;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) { return nvmlDeviceGetCount_v2(count); }

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    if (g_refcount <= 0) return NVML_ERROR_UNINITIALIZED;
    if (!device || index >= (unsigned int)g_n_devices) return NVML_ERROR_INVALID_ARGUMENT;
    if (is_lost(&g_devices[index])) return NVML_ERROR_GPU_IS_LOST;
    *device = &g_devices[index];
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device) {
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device) {
    if (g_refcount <= 0) return NVML_ERROR_UNINITIALIZED;
    if (!uuid || !device) return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < g_n_devices; i++)
        if (!strcmp(g_devices[i].uuid, uuid)) { *device = &g_devices[i]; return check(*device); }
    for (int i = 0; i < g_n_migs; i++)
        if (!strcmp(g_migs[i].uuid, uuid)) { *device = &g_migs[i]; return check(*device); }
    return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t d, unsigned int *index) {
    nvmlReturn_t r = check(d);
    if (r) return r;
    if (!index) return NVML_ERROR_INVALID_ARGUMENT;
    if (d->is_mig) return NVML_ERROR_NOT_SUPPORTED;
    *index = (unsigned int)d->index;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int len) {
    nvmlReturn_t r = check(d);
    return r ? r : copy_str(uuid, len, d->uuid);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int len) {
    nvmlReturn_t r = check(d);
    if (r) return r;
    if (d->unsupported & U_NAME) return NVML_ERROR_NOT_SUPPORTED;
    return copy_str(name, len, d->name);
}

/* ---- readings --------------------------------------------------------------- */
static nvmlReturn_t memory(nvmlDevice_t d, unsigned long long *total, unsigned long long *used) {
    nvmlReturn_t r = check(d);
    if (r) return r;
    if (d->unsupported & U_MEMORY) return NVML_ERROR_NOT_SUPPORTED;
    *total = d->total;
    *used = at(d, &d->used, 0);
    if (*used > *total) *used = *total;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m) {
    if (!m) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned long long total, used;
    nvmlReturn_t r = memory(d, &total, &used);
    if (r) return r;
    m->total = total;
    m->used = used;
    m->free = total - used;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m) {
    if (!m) return NVML_ERROR_INVALID_ARGUMENT;
    if (m->version != NVML_MEMORY_V2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    unsigned long long total, used;
    nvmlReturn_t r = memory(d, &total, &used);
    if (r) return r;
    m->total = total;
    m->reserved = 0;
    m->used = used;
    m->free = total - used;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u) {
    nvmlReturn_t r = check(d);
    if (r) return r;
    if (!u) return NVML_ERROR_INVALID_ARGUMENT;
    if ((d->unsupported & U_UTIL) || d->is_mig || d->mig_mode) return NVML_ERROR_NOT_SUPPORTED;
    u->gpu = (unsigned int)at(d, &d->util, 0);
    u->memory = d->total ? (unsigned int)(at(d, &d->used, 0) * 100 / d->total) : 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *mw) {
    nvmlReturn_t r = check(d);
    if (r) return r;
    if (!mw) return NVML_ERROR_INVALID_ARGUMENT;
    if ((d->unsupported & U_POWER) || d->is_mig) return NVML_ERROR_NOT_SUPPORTED;
    *mw = (unsigned int)(at(d, &d->power, 100) * 1000);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned int *t) {
    nvmlReturn_t r = check(d);
    if (r) return r;
    if (!t || sensor != 0) return NVML_ERROR_INVALID_ARGUMENT;
    if ((d->unsupported & U_TEMP) || d->is_mig) return NVML_ERROR_NOT_SUPPORTED;
    *t = (unsigned int)at(d, &d->temp, 40);
    return NVML_SUCCESS;
}

/* ---- MIG ------------------------------------------------------------------ */
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned int *current, unsigned int *pending) {
    nvmlReturn_t r = check(d);
    if (r) return r;
    if (!current || !pending) return NVML_ERROR_INVALID_ARGUMENT;
    if ((d->unsupported & U_MIG) || d->is_mig) return NVML_ERROR_NOT_SUPPORTED;
    *current = *pending = d->mig_mode ? 1 : 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t d, unsigned int *count) {
    nvmlReturn_t r = check(d);
    if (r) return r;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    if ((d->unsupported & U_MIG) || d->is_mig) return NVML_ERROR_NOT_SUPPORTED;
    *count = d->mig_mode ? MAX_MIGS : 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t d, unsigned int index, nvmlDevice_t *mig) {
    nvmlReturn_t r = check(d);
    if (r) return r;
    if (!mig || d->is_mig || !d->mig_mode || index >= MAX_MIGS) return NVML_ERROR_INVALID_ARGUMENT;
    if (index >= (unsigned int)d->n_migs) return NVML_ERROR_NOT_FOUND;
    *mig = d->migs[index];
    return check(*mig);
}

nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t d, unsigned int *is_mig) {
    nvmlReturn_t r = check(d);
    if (r) return r;
    if (!is_mig) return NVML_ERROR_INVALID_ARGUMENT;
    *is_mig = (unsigned int)d->is_mig;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t mig, nvmlDevice_t *device) {
    nvmlReturn_t r = check(mig);
    if (r) return r;
    if (!device || !mig->is_mig) return NVML_ERROR_INVALID_ARGUMENT;
    *device = mig->parent;
    return NVML_SUCCESS;
}

/* distributed's has_cuda_context() asks for processes: none run on a fake GPU. */
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *count, void *infos) {
    (void)infos;
    nvmlReturn_t r = check(d);
    if (r) return r;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    *count = 0;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *count, void *infos) {
    return nvmlDeviceGetComputeRunningProcesses_v3(d, count, infos);
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int *count, void *infos) {
    return nvmlDeviceGetComputeRunningProcesses_v3(d, count, infos);
}
