@main
struct EmulatorCommand {
    static func main() {}
}
