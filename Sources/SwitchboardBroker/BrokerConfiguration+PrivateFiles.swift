import SwitchboardRuntime

extension BrokerConfiguration {
    /// Makes the data directory and the journal private before the journal is opened: the
    /// journal holds names, dates of birth and locations (protocol/README.md, section 13.6).
    ///
    /// The directory is created 0700 and the journal file 0600 before SQLite opens it; SQLite
    /// gives the `-wal` and `-shm` files it creates the journal's own mode. A directory, journal,
    /// `-wal` or `-shm` that group or others can reach is refused, naming the `chmod` that fixes
    /// it, rather than tightened behind the operator's back.
    func preparePrivateFiles() throws(PrivateFiles.Failure) {
        try PrivateFiles.ensureDirectory(dataDirectory, what: "broker data directory")
        // A journal in PostgreSQL has no file here (the data directory keeps endpoints.json).
        guard journalStore == .sqlite else { return }
        try PrivateFiles.checkExisting([journalPath, journalPath + "-wal", journalPath + "-shm"], what: "journal file")
        try PrivateFiles.createFile(journalPath, what: "journal file")
    }
}
