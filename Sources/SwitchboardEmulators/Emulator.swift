// Work in progress: this module is being written now (issues 4 and 5).
