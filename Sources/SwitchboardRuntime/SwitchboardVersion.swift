/// The version every program answers to `--version`: one string for the whole release.
public enum SwitchboardVersion {
    public static let current = "0.28.0"
}
