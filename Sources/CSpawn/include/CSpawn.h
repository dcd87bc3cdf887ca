// The two GNU posix_spawn file actions ChildProcess needs, which glibc declares only under
// _GNU_SOURCE (so Swift's Glibc module does not show them).
#ifndef SWITCHBOARD_CSPAWN_H
#define SWITCHBOARD_CSPAWN_H

#include <spawn.h>

/// posix_spawn_file_actions_addchdir_np: the child starts in `path`.
int switchboard_spawn_add_chdir(posix_spawn_file_actions_t *actions, const char *path);

/// posix_spawn_file_actions_addclosefrom_np: the child closes every descriptor from `from` up.
int switchboard_spawn_add_closefrom(posix_spawn_file_actions_t *actions, int from);

#endif
