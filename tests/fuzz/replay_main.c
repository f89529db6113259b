/* A stand-in for libFuzzer's main() where the compiler has none (gcc): runs
 * LLVMFuzzerTestOneInput once on every file named on the command line and on
 * every regular file of every directory named there, each from a heap copy
 * of its exact size. Fails when no input was found, so that a wrong corpus
 * path cannot pass. A violated invariant aborts inside the target. */
#include <dirent.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

/* Runs the target on the file at path; 1 if it was a regular file. */
static int replay_file(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        exit(2);
    }
    size_t size = (size_t)st.st_size;
    uint8_t *data = malloc(size ? size : 1);
    if (!data || fread(data, 1, size, f) != size) {
        fprintf(stderr, "replay: cannot read %s\n", path);
        exit(2);
    }
    fclose(f);
    LLVMFuzzerTestOneInput(data, size);
    free(data);
    return 1;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Runs the target on every file of dir, in name order; the count. */
static int replay_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return replay_file(dir);
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            names = realloc(names, cap * sizeof *names);
        }
        size_t len = strlen(dir) + strlen(de->d_name) + 2;
        if (!names || !(names[n] = malloc(len))) {
            fprintf(stderr, "replay: out of memory\n");
            exit(2);
        }
        snprintf(names[n++], len, "%s/%s", dir, de->d_name);
    }
    closedir(d);
    if (n)
        qsort(names, n, sizeof *names, cmp_names);
    int count = 0;
    for (size_t i = 0; i < n; i++) {
        count += replay_file(names[i]);
        free(names[i]);
    }
    free(names);
    return count;
}

int main(int argc, char **argv)
{
    int count = 0;
    for (int i = 1; i < argc; i++)
        count += replay_dir(argv[i]);
    if (count == 0) {
        fprintf(stderr, "replay: no input files in the given paths\n");
        return 1;
    }
    printf("replay: %d inputs ran without a violation\n", count);
    return 0;
}
