// Work in progress: the back-end clients are being written now (issue 5).
