@main
struct AuthCommand {
    static func main() {}
}
