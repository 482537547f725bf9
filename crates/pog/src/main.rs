fn main() {
    let platform = pog_device::RealPlatform::new(pog_device::RealConfig::default());
    let inv = pog_device::collect(&platform);
    println!("{}", serde_json::to_string_pretty(&inv).unwrap());
}
